"""Each spyne workaround in gateway.submission.compat is still needed (these fail once upstream fixes the problem), and
does what it is there for: a client's mistake is answered with a fault and logged by the gateway as one request
line, without spyne's traceback.  spyne serves the submission API (whose WSDL it generates); the Birdbath services'
faults are the codec's, logged the same way."""

from __future__ import annotations

import logging
import urllib.error
import urllib.request

import pytest

from gateway.submission import compat
from tests.test_execution import wait_until

BAD_VALUE = (b'<s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/"><s:Body>'
             b'<c:beginTransaction xmlns:c="urn:condor"><duration>not-a-number</duration></c:beginTransaction>'
             b"</s:Body></s:Envelope>")
BAD_SUBMISSION_VALUE = (b'<s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/"><s:Body>'
                        b'<c:fetch xmlns:c="urn:birdbath:submission"><start>not-a-number</start></c:fetch>'
                        b"</s:Body></s:Envelope>")
MALFORMED = b"<s:Envelope xmlns:s='http://schemas.xmlsoap.org/soap/envelope/'><s:Body><unclosed>"


def parse_in_spyne(body: bytes, caplog: pytest.LogCaptureFixture) -> tuple[object, list[logging.LogRecord]]:
    """Run a request through spyne's parsing as the dispatcher does; its error, and what spyne logged (ERROR+)."""
    from spyne import MethodContext
    from spyne.server import ServerBase

    from gateway.submission.service import soap_application

    server = ServerBase(soap_application())
    ctx = MethodContext(server, MethodContext.SERVER)
    ctx.in_string = [body]
    caplog.clear()
    with caplog.at_level(logging.DEBUG):
        ctx = server.generate_contexts(ctx)[0]
        if ctx.in_error is None:
            server.get_in_object(ctx)
    records = [r for r in caplog.records if r.name.startswith("spyne") and r.levelno >= logging.ERROR]
    return ctx.in_error, records


def test_spyne_still_logs_client_mistakes_with_tracebacks(caplog):
    for name in compat.NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.NOTSET)
    try:
        error, records = parse_in_spyne(BAD_SUBMISSION_VALUE, caplog)
        assert error is not None
        noisy = [r for r in records if r.name in compat.NOISY_LOGGERS]
        assert noisy, "spyne no longer logs client faults at ERROR: drop _quiet_client_fault_tracebacks"
    finally:
        compat._installed = False
        compat.install()


@pytest.mark.parametrize("body", [BAD_SUBMISSION_VALUE, MALFORMED], ids=["bad value", "malformed XML"])
def test_after_install_a_client_mistake_is_still_a_fault_but_spyne_logs_nothing(caplog, body):
    compat.install()
    error, records = parse_in_spyne(body, caplog)
    assert error is not None  # the fault the client gets is unchanged
    assert records == [], [f"{r.name}: {r.getMessage()}" for r in records]


def test_the_gateway_logs_a_client_mistake_as_one_line_without_a_traceback(gateway):
    bad_value = "beginTransaction from 127.0.0.1: Client: The value 'not-a-number' could not be validated."
    for body, words in ((BAD_VALUE, bad_value), (MALFORMED, "- from 127.0.0.1: Client: Malformed XML")):
        with pytest.raises(urllib.error.HTTPError) as answer:
            urllib.request.urlopen(urllib.request.Request(gateway.url, body, {"Content-Type": "text/xml"}),
                                   timeout=30)
        assert answer.value.code == 500 and b"<faultcode>soap11env:Client</faultcode>" in answer.value.read()
        wait_until(lambda words=words: words in gateway.log())
        assert sum(words in line for line in gateway.log().splitlines()) == 1
    log = gateway.log()
    assert "Traceback" not in log and "spyne" not in log, log


def close_a_context(monkeypatch: pytest.MonkeyPatch) -> int:
    """Close a spyne method context more than a second after spyne's last collection; how many full collections
    that ran."""
    import gc

    import spyne.context
    from spyne import MethodContext
    from spyne.server import ServerBase

    from gateway.submission.service import soap_application

    collections: list[int] = []
    monkeypatch.setattr(spyne.context, "_LAST_GC_RUN", 0.0)
    monkeypatch.setattr(gc, "collect", lambda *args: collections.append(1) or 0)
    MethodContext(ServerBase(soap_application()), MethodContext.SERVER).close()
    return len(collections)


def test_spyne_still_collects_garbage_when_a_context_closes(monkeypatch):
    from spyne import const

    monkeypatch.setattr(const, "MIN_GC_INTERVAL", 1.0)  # spyne's own setting
    assert close_a_context(monkeypatch) == 1, "spyne no longer collects per request: drop _no_collection_per_request"


def test_after_install_closing_a_context_collects_nothing(monkeypatch):
    compat.install()
    assert close_a_context(monkeypatch) == 0

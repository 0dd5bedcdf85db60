"""Each spyne workaround in gateway.soap.compat is still needed (these fail once upstream fixes the problem)."""

from __future__ import annotations

import logging

from gateway.soap import compat


def test_spyne_still_logs_client_mistakes_with_tracebacks(caplog):
    from spyne import MethodContext
    from spyne.server import ServerBase

    from gateway.soap.application import schedd_application

    for name in compat.NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.NOTSET)
    try:
        server = ServerBase(schedd_application())
        ctx = MethodContext(server, MethodContext.SERVER)
        ctx.in_string = [b'<s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/"><s:Body>'
                         b'<c:beginTransaction xmlns:c="urn:condor"><duration>x</duration></c:beginTransaction>'
                         b"</s:Body></s:Envelope>"]
        with caplog.at_level(logging.DEBUG):
            ctx = server.generate_contexts(ctx)[0]
            server.get_in_object(ctx)
        assert ctx.in_error is not None
        noisy = [r for r in caplog.records if r.name in compat.NOISY_LOGGERS and r.levelno >= logging.ERROR]
        assert noisy, "spyne no longer logs client faults at ERROR: drop _quiet_client_fault_tracebacks"
    finally:
        compat._installed = False
        compat.install()


def test_after_install_those_records_are_gone(caplog):
    compat.install()
    for name in compat.NOISY_LOGGERS:
        assert logging.getLogger(name).getEffectiveLevel() == logging.CRITICAL

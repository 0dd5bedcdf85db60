"""The bare Twisted + lxml baseline: a SOAP server that does only what any Python SOAP server on this stack must.

It reads the request with twisted.web, parses the envelope with lxml (entities off, as the gateway's parser), takes
the operation from the body's first element and answers fixed bytes for it (captured from the gateway by the
benchmark that starts it, so both send the same answer).  No caller identification, no request log, no operation:
what the gateway's condorSchedd path is measured against (issue #15 item 4: >= 0.6 of this in the same run).

As written it is twisted.web's plain ``Site``, the issue's baseline.  ``--tuned`` also turns off what the gateway's
own site turns off (parsing every POST body as a form, which parses each Content-Type with the email package) and
the access log: about three times the requests/s, the floor of the stack rather than of a straightforward program.

Run: ``python bench/bare_server.py ANSWERS_DIR PORT_FILE [--tuned]`` (ANSWERS_DIR holds ``<operation>.xml``; it
listens on a free loopback port and writes it to PORT_FILE).
"""

from __future__ import annotations

import sys
from pathlib import Path

from lxml import etree
from twisted.internet import reactor
from twisted.web import resource, server

BODY = "{http://schemas.xmlsoap.org/soap/envelope/}Body"
PARSER = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)


class FixedAnswers(resource.Resource):
    """Every POST: parse, find the operation, answer its bytes (an unknown one: 500 and an empty body)."""

    isLeaf = True

    def __init__(self, answers: dict[str, bytes]) -> None:
        super().__init__()
        self._answers = answers

    def render_POST(self, request: server.Request) -> bytes:
        envelope = etree.fromstring(request.content.read(), PARSER)
        operation = etree.QName(envelope.find(BODY)[0]).localname
        request.setHeader(b"content-type", b"text/xml; charset=utf-8")
        answer = self._answers.get(operation)
        if answer is None:
            request.setResponseCode(500)
            return b""
        return answer


class TunedSite(server.Site):
    """No form parsing of bodies (as the gateway's site), no access log."""

    noisy = False

    def __init__(self, root: resource.Resource) -> None:
        super().__init__(root, parsePOSTFormSubmission=False)

    def log(self, request: server.Request) -> None:
        """No access log."""


def main() -> None:
    answers_dir, port_file = Path(sys.argv[1]), Path(sys.argv[2])
    answers = {path.stem: path.read_bytes() for path in answers_dir.glob("*.xml")}
    site = (TunedSite if "--tuned" in sys.argv[3:] else server.Site)(FixedAnswers(answers))
    port = reactor.listenTCP(0, site, interface="127.0.0.1")
    port_file.write_text(str(port.getHost().port))
    reactor.run()


if __name__ == "__main__":
    main()

"""The spyne application of the condorSchedd service, speaking gSOAP-shaped SOAP 1.1."""

from __future__ import annotations

from spyne import Application

from .models import TNS
from .protocol import GsoapSoap11
from .schedd import OPERATIONS, CondorScheddService


def schedd_application() -> Application:
    protocol = GsoapSoap11(namespace=TNS, operations=frozenset(OPERATIONS))
    return Application([CondorScheddService], tns=TNS, name="condorSchedd",
                       in_protocol=protocol, out_protocol=GsoapSoap11(namespace=TNS, operations=frozenset()))

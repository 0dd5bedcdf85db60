"""A client for HTCondor's Birdbath SOAP API (the condorSchedd web service), as served by birdbath-gateway or by
an HTCondor 6.8-8.6 schedd with ENABLE_SOAP."""

from .ads import Expr, from_struct, to_struct
from .errors import GatewayError, GatewayUnavailable
from .schedd import JobId, Schedd, Transaction

__all__ = ["Expr", "GatewayError", "GatewayUnavailable", "JobId", "Schedd", "Transaction", "from_struct",
           "to_struct"]

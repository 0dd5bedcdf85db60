"""A client for HTCondor's Birdbath SOAP API (the condorSchedd web service), as served by birdbath-gateway or by
an HTCondor 6.8-8.6 schedd with ENABLE_SOAP."""

from .ads import Expr, from_struct, to_struct
from .collector import Collector
from .credentials import Credentials
from .errors import GatewayError, GatewayUnavailable, Refused, UnknownJob
from .jobs import JobId, JobStatus, Selection
from .schedd import Schedd, Transaction
from .submission import SubmissionApi

__all__ = ["Collector", "Credentials", "Expr", "GatewayError", "GatewayUnavailable", "JobId", "JobStatus", "Refused",
           "Schedd", "Selection", "SubmissionApi", "Transaction", "UnknownJob", "from_struct", "to_struct"]

"""A gateway that speaks HTCondor's retired Birdbath SOAP API in front of pluggable schedd backends."""

__version__ = "0.1.0"

"""A gateway that speaks HTCondor's retired Birdbath SOAP API in front of pluggable schedd backends."""

from jobmodel import __version__

__all__ = ["__version__"]

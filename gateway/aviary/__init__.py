"""Aviary, Red Hat MRG Grid's SOAP API: its job and query services on the SOAP codec (``gateway.soap``)."""

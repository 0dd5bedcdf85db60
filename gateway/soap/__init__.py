"""The SOAP codec every SOAP front end shares: envelopes read by a hardened parser (``protocol``), XML Schema types
that read and write themselves (``xsd``), a service's contract read from its published WSDL (``contract``,
``wsdl``) with the leniencies gSOAP allowed (``lenient``), one codec per contract (``codec``) and the answers handed
to the transport (``answer``).  It knows no standard: Birdbath (``gateway.birdbath``), Aviary (``gateway.aviary``)
and the submission API (``gateway.submission``) are built on it."""

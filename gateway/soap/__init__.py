"""Everything that speaks SOAP: the Birdbath wire types, the condorSchedd service, the gSOAP-shaped protocol,
the spyne-on-Twisted transport and the published WSDL."""

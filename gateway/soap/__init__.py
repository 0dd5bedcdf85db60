"""Everything that speaks SOAP: the Birdbath services (condorSchedd, condorCollector) served by one codec per
contract, made from the published WSDLs, and the submission API served by spyne, which generates its WSDL."""

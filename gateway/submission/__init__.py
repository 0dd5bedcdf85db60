"""The simplified submission API (submit/create/send, submissions, control, queries): its SOAP form served by spyne,
which also generates its WSDL, and its JSON form, both calling the core's ``SubmissionService``."""

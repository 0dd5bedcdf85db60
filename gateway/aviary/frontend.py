"""Aviary as a front end: its job and query services at Axis2's paths (``/services/job/<operation>``), the schemas
their WSDLs import beside them."""

from __future__ import annotations

from gateway.core.auth import Caller
from gateway.frontend import Core, FrontEnd, Sites
from gateway.soap.resource import Service, publish

from .services import AviaryContext, job_service, query_service


class Aviary(FrontEnd):
    name = "aviary"

    def mount(self, sites: Sites, core: Core) -> None:
        def context(caller: Caller) -> AviaryContext:
            return AviaryContext(caller=caller, service=core.submissions)

        job, query = Service(job_service(), context), Service(query_service(), context)
        for path, service, document in (("/services/job", job, "aviary-job.wsdl"),
                                        ("/services/query", query, "aviary-query.wsdl"),
                                        ("/services/aviary-job.xsd", job, "aviary-job.xsd"),
                                        ("/services/aviary-query.xsd", query, "aviary-query.xsd"),
                                        ("/services/aviary-common.xsd", query, "aviary-common.xsd")):
            publish(sites.gateway, path, lambda body, service=service: service, document)


FRONT_END = Aviary()

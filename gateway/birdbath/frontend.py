"""Birdbath as a front end: condorSchedd at every path no other front end holds (gSOAP's servers answered any path),
condorCollector at ``/condorCollector`` and on its own port (``collector_port``), and on one port both by the
body's first element (:func:`schedd_or_collector`)."""

from __future__ import annotations

from collections.abc import Callable

from gateway.core.auth import Caller
from gateway.frontend import Core, FrontEnd, Sites
from gateway.soap.resource import Service, operation_of, publish

from .collector import COLLECTOR_ONLY, CollectorContext, collector_service, query_answers
from .context import RequestContext
from .schedd import job_ad_answers, schedd_service


def schedd_or_collector(schedd: Service, collector: Service) -> Callable[[bytes], Service]:
    """One port for both services, as gSOAP dispatched them (on the body's first element, whatever the path): a
    collector-only operation goes to condorCollector, everything else (getVersionString and getPlatformString
    included, and whatever cannot be read) to condorSchedd, which answers it as it always did."""
    return lambda body: collector if operation_of(body) in COLLECTOR_ONLY else schedd


class Birdbath(FrontEnd):
    name = "birdbath"

    def mount(self, sites: Sites, core: Core) -> None:
        schedd_wire, collector_wire = schedd_service(), collector_service()
        ads, machine_ads = job_ad_answers(schedd_wire), query_answers(collector_wire)

        def schedd_context(caller: Caller) -> RequestContext:
            return RequestContext(caller=caller, schedd=core.schedd, answers=ads)

        def collector_context(caller: Caller) -> CollectorContext:
            return CollectorContext(caller=caller, collector=core.collector, answers=machine_ads)

        collector = Service(collector_wire, collector_context)
        split = schedd_or_collector(Service(schedd_wire, schedd_context), collector)
        publish(sites.gateway, "", split, "condorSchedd.wsdl")
        publish(sites.gateway, "/condorCollector", split, "condorCollector.wsdl")
        publish(sites.collector, "", lambda body: collector, "condorCollector.wsdl")  # every path the collector's


FRONT_END = Birdbath()

"""Every path the gateway serves, as one twisted.web resource tree, built here.

```
/                                  Branch: a name it does not hold goes to condorSchedd (gSOAP answered any path)
├─ <any path>                      SoapResource: condorSchedd, or condorCollector for a collector-only operation
├─ condorCollector                 SoapResource: the same split; its WSDL at ?wsdl
├─ submission                      SoapResource: the submission API's SOAP form (spyne); WSDL at ?wsdl
│  └─ json/<operation>             JsonResource: its JSON form
├─ services/job, services/query    SoapResource: Aviary's job and query services (and their .xsd schemas)
├─ metrics, healthz, readyz        the monitoring pages (gateway/monitoring/web.py)
└─ <mounted>                       Routes.mount(path, resource): any twisted.web resource, e.g. a REST face
```

A GET whose last segment is a WSDL's file name (``/condorSchedd.wsdl``, ``/x/condorCollector.wsdl``) is that
service's WSDL, whatever the path before it.  The collector's own port (``collector_port``) has a tree of one
resource: every path and every operation is the collector's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from twisted.web import resource

from gateway.birdbath.collector import COLLECTOR_ONLY
from gateway.http import Branch, JsonResource, Service, SoapResource
from gateway.soap.wsdl import PublishedWsdl, wsdl_path
from gateway.submission.jsonapi import JsonApi

#: the local name of a SOAP body's first element (comments or processing instructions before it: not recognised)
_FIRST_IN_BODY = re.compile(rb"<(?:[A-Za-z_][\w.-]*:)?Body\b[^>]*>\s*<(?:[A-Za-z_][\w.-]*:)?([A-Za-z_][\w.-]*)")


def operation_of(body: bytes) -> str | None:
    """The operation a SOAP request names, read from the first bytes after ``<...:Body ...>`` without parsing the
    document (the schedd's requests must not pay for a second parse); None when it cannot be read so."""
    found = _FIRST_IN_BODY.search(body)
    return found.group(1).decode("ascii") if found else None


def schedd_or_collector(schedd: Service, collector: Service) -> Callable[[bytes], Service]:
    """One port for both services, as gSOAP dispatched them (on the body's first element, whatever the path): a
    collector-only operation goes to condorCollector, everything else (getVersionString and getPlatformString
    included, and whatever cannot be read) to condorSchedd, which answers it as it always did."""
    return lambda body: collector if operation_of(body) in COLLECTOR_ONLY else schedd


class Routes:
    """The site's tree: ``root`` is what the site serves.  Services are added by path; any other resource is
    mounted with :meth:`mount`."""

    def __init__(self, fallback: SoapResource) -> None:
        self.wsdl_files = fallback.wsdl_files
        self.root = Branch(fallback)
        self._publish(fallback)

    def service(self, path: str, service: Callable[[bytes], Service], wsdl: str | None = None) -> SoapResource:
        """A SOAP service at ``path`` and below it; ``wsdl``, a file of ``wsdl/``, is published at ``?wsdl`` and by
        its file name."""
        served = SoapResource(service, PublishedWsdl(wsdl_path(wsdl)) if wsdl else None, path.strip("/"),
                              wsdl.encode() if wsdl else b"", self.wsdl_files)
        self._publish(served)
        return self.mount(path, served)

    def mount(self, path: str, child: resource.Resource) -> resource.Resource:
        """Serve ``child`` at ``path`` (``/api/v1``) and, as twisted.web does, every path below it that ``child``
        takes (a leaf takes them all).  The segments on the way are :class:`Branch` es: a name they do not hold
        is the fallback service's, as at the root."""
        *parents, name = path.strip("/").encode().split(b"/")
        node = self.root
        for parent in parents:
            step = node.children.get(parent)
            if step is None:
                step = Branch(self.root.fallback)
                node.putChild(parent, step)
            node = step
        node.putChild(name, child)
        return child

    def _publish(self, served: SoapResource) -> None:
        if served.file_name:
            self.wsdl_files[served.file_name] = served


def gateway_routes(*, schedd: Service, collector: Service, submission: Service, json_api: JsonApi, aviary_job: Service,
                   aviary_query: Service, pages: Mapping[str, resource.Resource]) -> Routes:
    """The tree of the gateway's port (and of its SSL port, local socket and shared port: one site)."""
    split = schedd_or_collector(schedd, collector)
    routes = Routes(SoapResource(split, PublishedWsdl(wsdl_path("condorSchedd.wsdl")), "", b"condorSchedd.wsdl"))
    routes.service("/condorCollector", split, "condorCollector.wsdl")
    soap = routes.service("/submission", lambda body: submission, "submission.wsdl")
    soap.putChild(b"json", JsonResource(json_api, submission.context_for))
    # Aviary's services at Axis2's paths (/services/job/<operation>), the schemas their WSDLs import beside them
    routes.service("/services/job", lambda body: aviary_job, "aviary-job.wsdl")
    routes.service("/services/query", lambda body: aviary_query, "aviary-query.wsdl")
    routes.service("/services/aviary-job.xsd", lambda body: aviary_job, "aviary-job.xsd")
    for schema in ("aviary-query.xsd", "aviary-common.xsd"):
        routes.service(f"/services/{schema}", lambda body: aviary_query, schema)
    for path, page in pages.items():
        routes.mount(path, page)
    return routes


def collector_routes(collector: Service) -> Routes:
    """The tree of the collector's own port (``collector_port``): every request is the collector's, as on a real
    collector."""
    return Routes(SoapResource(lambda body: collector, PublishedWsdl(wsdl_path("condorCollector.wsdl")), "",
                               b"condorCollector.wsdl"))

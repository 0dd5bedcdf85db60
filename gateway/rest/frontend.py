"""REST as a front end: ``/api`` (``/api/v1/...``, routed by its OpenAPI contract) and the contract itself at
``/openapi.json``."""

from __future__ import annotations

from gateway.frontend import Core, FrontEnd, Sites

from .contract import Contract
from .resources import ContractPage, RestApi


class Rest(FrontEnd):
    name = "rest"

    def mount(self, sites: Sites, core: Core) -> None:
        contract = Contract.load()
        sites.gateway.mount("/api", RestApi(contract, core.schedd, core.submissions, core.collector, core.described,
                                            lease=core.config.staging_lifetime,
                                            max_upload=core.config.max_request_bytes, offload=core.offload))
        sites.gateway.mount("/openapi.json", ContractPage(contract))


FRONT_END = Rest()

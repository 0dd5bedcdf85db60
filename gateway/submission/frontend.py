"""The submission API as a front end: its SOAP form (spyne) at ``/submission``, its JSON form at
``/submission/json/<operation>``."""

from __future__ import annotations

from collections.abc import Callable

from gateway.core.auth import Caller
from gateway.frontend import Core, FrontEnd, Sites
from gateway.http import Answering, GatewayRequest
from gateway.soap.resource import Service, publish

from .dispatch import SoapDispatcher
from .jsonapi import JSON, JsonApi, fail_document
from .service import SubmissionContext, soap_application


class JsonResource(Answering):
    """The JSON form: ``POST <here>/<operation>``, the rest of the path naming the operation."""

    isLeaf = True
    content_type = JSON

    def __init__(self, api: JsonApi, context_for: Callable[[Caller], SubmissionContext]) -> None:
        super().__init__()
        self.api = api
        self.context_for = context_for

    def refusal(self, message: str) -> bytes:
        return fail_document(message)

    def render_POST(self, request: GatewayRequest) -> int | bytes:
        if request.refusal is not None:
            return self.refuse(request, request.refusal)
        body = request.content.read() if request.content is not None else b""
        operation = b"/".join(request.postpath).strip(b"/").decode("utf-8", "replace")
        context = self.context_for(request.caller)
        return self.answer_with(self.api.answer(operation, body, context), request, context)


class Submission(FrontEnd):
    name = "submission"

    def mount(self, sites: Sites, core: Core) -> None:
        def context(caller: Caller) -> SubmissionContext:
            return SubmissionContext(caller=caller, service=core.submissions)

        soap = Service(SoapDispatcher(soap_application()), context)
        publish(sites.gateway, "/submission", lambda body: soap, "submission.wsdl").putChild(
            b"json", JsonResource(JsonApi(), context))
        sites.gateway.signposts.append("POST JSON to /submission/json/<operation>")


FRONT_END = Submission()

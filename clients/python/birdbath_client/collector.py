"""The pool, as Birdbath's condorCollector service describes it: machines, schedulers, submitters and other ads,
queried by kind and ClassAd constraint, and ads advertised to it (``insertAd``)."""

from __future__ import annotations

from typing import Any, Mapping

from .ads import from_struct, to_struct
from .credentials import Credentials
from .errors import GatewayError
from .schedd import connect, invoke

__all__ = ["KINDS", "Collector"]

#: the kinds of ads, by the name condor_status uses, and the query operation and ClassAdType of each
KINDS = {
    "startd": ("queryStartdAds", "STARTD-AD-TYPE"), "schedd": ("queryScheddAds", "SCHEDD-AD-TYPE"),
    "submitter": ("querySubmittorAds", "SUBMITTOR-AD-TYPE"), "master": ("queryMasterAds", "MASTER-AD-TYPE"),
    "license": ("queryLicenseAds", "LICENSE-AD-TYPE"), "storage": ("queryStorageAds", "STORAGE-AD-TYPE"),
    "collector": ("queryAnyAds", "COLLECTOR-AD-TYPE"), "negotiator": ("queryAnyAds", "NEGOTIATOR-AD-TYPE"),
    "generic": ("queryAnyAds", "GENERIC-AD-TYPE"), "any": ("queryAnyAds", None),
}
#: the MyType of the kinds the service has no query of their own for (asked for as any ad of that MyType)
_BY_MYTYPE = {"collector": "Collector", "negotiator": "Negotiator", "generic": "Generic"}


class Collector:
    """``Collector("http://host:1984/")``: the condorCollector service of a gateway (its own port, or its
    ``collector_port``), or of an HTCondor 6.8-8.6 collector with ``ENABLE_SOAP`` given ``wsdl``, a copy of its
    condorCollector.wsdl."""

    def __init__(self, url: str | None = None, wsdl: str | None = None, timeout: float = 60,
                 credentials: Credentials = Credentials()) -> None:
        from .localsocket import resolve

        self.url, shared_port_id, local_socket = resolve(url)
        self._service = connect(self.url, "condorCollector", wsdl, timeout, credentials, shared_port_id,
                                local_socket)

    def query(self, kind: str = "startd", constraint: str | None = None) -> list[dict[str, Any]]:
        """The ads of one kind (``KINDS``; ``any`` for every kind) for which ``constraint`` is true, as dicts of
        typed values.  The service answers no status: a constraint it cannot evaluate gives no ads."""
        operation, _ = _kind(kind)
        mytype = _BY_MYTYPE.get(kind)
        if mytype is not None:
            constraint = f'MyType == "{mytype}"' + (f" && ({constraint})" if constraint else "")
        result = invoke(self._service, self.url, operation, constraint)
        return [from_struct(ad) for ad in (result or [])]

    def machines(self, constraint: str | None = None) -> list[dict[str, Any]]:
        return self.query("startd", constraint)

    def schedds(self, constraint: str | None = None) -> list[dict[str, Any]]:
        return self.query("schedd", constraint)

    def submitters(self, constraint: str | None = None) -> list[dict[str, Any]]:
        return self.query("submitter", constraint)

    def advertise(self, kind: str, ad: Mapping[str, Any]) -> str:
        """Advertise (insert or update) an ad of one kind; the service's message ("New ad inserted" or "Updated
        ad"), GatewayError when it refuses the ad."""
        _, ad_type = _kind(kind)
        if ad_type is None:
            raise ValueError("an ad is advertised as one kind of ad, not as any")
        status = invoke(self._service, self.url, "insertAd", ad_type, to_struct(ad))
        if status.code != "SUCCESS":
            raise GatewayError("insertAd", status.code, status.message)
        return status.message


def _kind(kind: str) -> tuple[str, str | None]:
    try:
        return KINDS[kind]
    except KeyError:
        raise ValueError(f"unknown kind of ad {kind!r}; one of {', '.join(KINDS)}") from None

"""The pool's ads for the htcondor backend: the pool's own collector answers, through ``htcondor2.Collector``.

A query goes to the collector with the client's constraint (the collector evaluates it, under its own
``QUERY_TIMEOUT``); a kind the bindings have no ``AdType`` for (storage, checkpoint server, Quill) is asked for as any
ad whose ``MyType`` is that kind's, as ``condor_status -any`` would.  ``insertAd`` becomes the ``UPDATE_*`` command
of its kind (``condor_advertise``'s names), which the collector authorises at its ``ADVERTISE_*`` level for the
gateway's own identity; whether the ad is new is asked of the collector first, since an update does not say.
Every bindings call that fails (the collector is down, it refused) is a :class:`BackendUnavailable` naming the call.
"""

from __future__ import annotations

from typing import Any, Callable

import classad2

from backends.interface import BackendError, BackendUnavailable
from jobmodel.pool import KEY_FALLBACK, NAME, AdType

#: condor_advertise's command for each kind (Quill is gone from the pools the 24.0 bindings reach)
UPDATE_COMMANDS = {
    AdType.STARTD: "UPDATE_STARTD_AD", AdType.SCHEDD: "UPDATE_SCHEDD_AD", AdType.SUBMITTOR: "UPDATE_SUBMITTOR_AD",
    AdType.LICENSE: "UPDATE_LICENSE_AD", AdType.MASTER: "UPDATE_MASTER_AD", AdType.CKPTSRVR: "UPDATE_CKPT_SRVR_AD",
    AdType.COLLECTOR: "UPDATE_COLLECTOR_AD", AdType.STORAGE: "UPDATE_STORAGE_AD",
    AdType.NEGOTIATOR: "UPDATE_NEGOTIATOR_AD", AdType.HAD: "UPDATE_HAD_AD", AdType.GENERIC: "UPDATE_AD_GENERIC",
}


def bindings_ad_type(ad_type: AdType) -> Any:
    """The ``htcondor2.AdType`` of a kind, or None for a kind the bindings cannot name."""
    import htcondor2

    names = {AdType.STARTD: "Startd", AdType.SCHEDD: "Schedd", AdType.SUBMITTOR: "Submitter",
             AdType.LICENSE: "License", AdType.MASTER: "Master", AdType.COLLECTOR: "Collector",
             AdType.NEGOTIATOR: "Negotiator", AdType.HAD: "HAD", AdType.GENERIC: "Generic", AdType.ANY: "Any"}
    name = names.get(ad_type)
    return getattr(htcondor2.AdType, name) if name else None


class CollectorPool:
    """``pool_ads``/``advertise`` over the collector ``connect()`` opens (once, on first use: constructing one reads
    the HTCondor configuration)."""

    def __init__(self, connect: Callable[[], Any]) -> None:
        self._connect = connect
        self._collector: Any = None

    def _call(self, operation: str, *args: Any, **kwargs: Any) -> Any:
        try:
            if self._collector is None:
                self._collector = self._connect()
            return getattr(self._collector, operation)(*args, **kwargs)
        except Exception as exc:  # the bindings raise their own types for an unreachable or refusing collector
            raise BackendUnavailable(f"the collector did not complete {operation}: {exc}") from None

    def pool_ads(self, ad_type: AdType, constraint: classad2.ExprTree | None, *, budget: float | None = None,
                 contact: str | None = None) -> list[classad2.ClassAd]:
        kind = bindings_ad_type(ad_type)
        text = str(constraint) if constraint is not None else None
        if kind is None:  # asked for as any ad of its MyType
            kind = bindings_ad_type(AdType.ANY)
            mine = f"MyType == {classad2.quote(ad_type.my_type)}"
            text = mine if text is None else f"({mine}) && ({text})"
        return list(self._call("query", kind, constraint=text))

    def advertise(self, ad_type: AdType, ad: classad2.ClassAd) -> bool:
        command = UPDATE_COMMANDS.get(ad_type)
        if command is None:
            raise BackendError(f"Unsupported internal command: the pool has no {ad_type.wire} ads")
        name = ad.get(NAME, ad.get(KEY_FALLBACK.get(ad_type, NAME)))
        if not isinstance(name, str):
            raise BackendError(f"the ad has no {NAME} string to be known by")
        if "MyType" not in ad:
            ad["MyType"] = ad_type.my_type
        known = self.pool_ads(ad_type, classad2.ExprTree(f"{NAME} == {classad2.quote(name)}"))
        self._call("advertise", [ad], command)
        return not known

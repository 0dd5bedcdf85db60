"""The kinds of ads a pool's collector keeps, and how the collector tells one ad of a kind from another.

The names are the collector WSDL's ``ClassAdType`` values and HTCondor's ``MyType`` strings (``condor_adtypes.h``);
the numbers are the C values the 6.8-8.6 WSDL shipped (with ``QUILL-AD-TYPE`` = 1), which gSOAP also accepted on
input.  ``ANY`` is no wire value: it is what ``queryAnyAds`` asks for.
"""

from __future__ import annotations

import enum


class AdType(enum.Enum):
    """One kind of pool ad: ``wire`` is its ``ClassAdType`` value, ``my_type`` the ``MyType`` its ads carry."""

    STARTD = ("STARTD-AD-TYPE", "Machine", 0)
    QUILL = ("QUILL-AD-TYPE", "Quill", 1)
    SCHEDD = ("SCHEDD-AD-TYPE", "Scheduler", 2)
    SUBMITTOR = ("SUBMITTOR-AD-TYPE", "Submitter", 3)
    LICENSE = ("LICENSE-AD-TYPE", "License", 4)
    MASTER = ("MASTER-AD-TYPE", "DaemonMaster", 5)
    CKPTSRVR = ("CKPTSRVR-AD-TYPE", "CkptServer", 6)
    COLLECTOR = ("COLLECTOR-AD-TYPE", "Collector", 7)
    STORAGE = ("STORAGE-AD-TYPE", "Storage", 8)
    NEGOTIATOR = ("NEGOTIATOR-AD-TYPE", "Negotiator", 9)
    HAD = ("HAD-AD-TYPE", "HAD", 10)
    GENERIC = ("GENERIC-AD-TYPE", "Generic", 11)
    ANY = ("", "Any", -1)

    def __init__(self, wire: str, my_type: str, code: int) -> None:
        self.wire = wire
        self.my_type = my_type
        self.code = code

    @classmethod
    def from_wire(cls, text: str) -> "AdType":
        """The type a client named, by its wire value or its C value (ValueError for anything else)."""
        text = text.strip()
        for ad_type in cls:
            if ad_type is not cls.ANY and text in (ad_type.wire, str(ad_type.code)):
                return ad_type
        raise ValueError(f"unknown ad type {text[:64]!r}")

    def target_type(self) -> str:
        """The ``TargetType`` ads of this kind carry: machines match jobs; other daemons' ads name no target."""
        return "Job" if self is AdType.STARTD else ""


#: the attribute that names an ad; an ad of a kind keyed by it may fall back on ``Machine`` (HTCondor's hash keys)
NAME = "Name"
KEY_FALLBACK = {AdType.STARTD: "Machine", AdType.MASTER: "Machine"}
#: kinds whose ads are told apart by one more attribute (a submitter is per owner *and* per schedd)
KEY_EXTRA = {AdType.SUBMITTOR: "ScheddName"}

#: the collector's default ``CLASSAD_LIFETIME`` (seconds an ad lives unless re-advertised, or its ``ClassAdLifetime``)
CLASSAD_LIFETIME = 900

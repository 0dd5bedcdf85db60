"""The operations behind the condorCollector service: querying the pool's ads and advertising new ones
(as HTCondor's collector answered them over SOAP), over a backend that declares ``Capability.POOL``.

Who may do what follows HTCondor's collector: a query is a ``QUERY_*_ADS`` command, which needs READ
(``allow_read``), and ``insertAd`` is an ``UPDATE_*_AD`` command, which needs the ``ADVERTISE_*`` level of its kind;
those default to DAEMON, and DAEMON to WRITE, so here it needs ``allow_write``.  A query answers no status: a query
that cannot be answered (a refused caller, a bad constraint, one over its budget) is an empty list, as in the
original, and its reason is only logged (:class:`~gateway.core.status.BirdbathError` carries it to the front end).
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import classad2
from twisted.internet.interfaces import IReactorTime

from backends.interface import BackendError, Capability, ScheddBackend
from jobmodel.classads import literal_string
from jobmodel.expressions import ExpressionLimits, ExpressionRefused
from jobmodel.pool import AdType

from .adstruct import Attr, BadAttribute, ad_to_struct, struct_to_ad
from .auth import AccessPolicy, Caller, Permission
from .queries import QueryRunner
from .status import BirdbathError

Struct = list[Attr]

#: the most attributes one advertised ad may have (a real machine ad has a few hundred)
MAX_AD_ATTRIBUTES = 4096
#: the most characters of names and values one advertised ad may have (a real machine ad has some tens of
#: thousands): the collector keeps max_advertised_ads of them in memory
MAX_AD_CHARACTERS = 256 * 1024


@dataclass(frozen=True)
class Inserted:
    """What insertAd did: the original's two SUCCESS texts."""

    new: bool

    @property
    def message(self) -> str:
        return "New ad inserted" if self.new else "Updated ad"


class BirdbathCollector:
    """The collector's operations for one backend.  ``contact()`` is the gateway's own address as ``<host:port>``
    (what its daemons' ads publish as ``MyAddress``)."""

    def __init__(self, backend: ScheddBackend, call: Callable[..., Any], policy: AccessPolicy, clock: IReactorTime,
                 queries: QueryRunner, contact: Callable[[], str], limits: ExpressionLimits = ExpressionLimits()) -> None:
        self.backend = backend
        self._call = call
        self.policy = policy
        self._clock = clock
        self.queries = queries
        self._contact = contact
        self._limits = limits
        #: the backend's version and platform texts (getVersionString, getPlatformString), read once
        self.backend_info = backend.info()

    @property
    def has_pool(self) -> bool:
        return Capability.POOL in self.backend.capabilities

    async def query(self, caller: Caller, ad_type: AdType, constraint: str | None) -> list[Struct]:
        """The ads of one kind (``AdType.ANY``: all) for which the constraint is true, converted for the wire."""
        self.policy.check(caller, Permission.READ)
        if not self.has_pool:
            raise BirdbathError.fail(f"the {self.backend.info().name} backend has no pool to describe")
        try:
            parsed = self.queries.constraint(constraint)
            return await self.queries.run(caller, self._query_structs, ad_type, parsed, self._now())
        except (ExpressionRefused, BackendError) as exc:  # QueryFailed, or a pool that is down
            raise BirdbathError.fail(f"Query failed: {exc}") from None

    def _query_structs(self, ad_type: AdType, constraint: classad2.ExprTree | None, now: int, *,
                       budget: float) -> list[Struct]:
        return [pool_struct(ad, now) for ad in
                self.backend.pool_ads(ad_type, constraint, budget=budget, contact=self._contact())]  # type: ignore[attr-defined]

    async def insert(self, caller: Caller, ad_type: AdType, attributes: Sequence[Attr] | None) -> Inserted:
        """Store an ad as an update from a daemon would be; FAIL with the original's texts where they apply."""
        self.policy.check(caller, Permission.WRITE)
        if not self.has_pool:
            raise BirdbathError.fail(f"Unsupported internal command: the {self.backend.info().name} backend has no "
                                     f"pool to advertise to")
        if attributes is None:
            raise BirdbathError.fail("Failed to parse the ClassAdStruct: the ad is missing")
        if len(attributes) > MAX_AD_ATTRIBUTES:
            raise BirdbathError.fail(f"Failed to parse the ClassAdStruct: {len(attributes)} attributes, more than "
                                     f"the {MAX_AD_ATTRIBUTES} an ad may have")
        size = sum(len(attribute.name or "") + len(attribute.value or "") for attribute in attributes)
        if size > MAX_AD_CHARACTERS:
            raise BirdbathError.fail(f"Failed to parse the ClassAdStruct: {size} characters of names and values, more "
                                     f"than the {MAX_AD_CHARACTERS} an ad may have")
        try:
            ad = struct_to_ad(attributes, self._limits)
        except BadAttribute as exc:
            raise BirdbathError.fail(f"Failed to parse the ClassAdStruct: {exc}") from None
        try:
            new = await self._call(self.backend.advertise, ad_type, ad)  # type: ignore[attr-defined]
        except BackendError as exc:
            raise BirdbathError.fail(f"Internal update failure: {exc}") from None
        return Inserted(bool(new))

    def _now(self) -> int:
        return int(self._clock.seconds())


def contact_address(address: Any) -> str:
    """A listening address as a sinful string, ``<ip:port>``; a wildcard address becomes this host's own address."""
    if address is None:
        return "<127.0.0.1:0>"
    host = address.host
    if host in ("", "0.0.0.0", "::"):
        try:
            host = socket.gethostbyname(socket.gethostname())
        except OSError:
            host = "127.0.0.1"
    return f"<[{host}]:{address.port}>" if ":" in host else f"<{host}:{address.port}>"


def pool_struct(ad: classad2.ClassAd, now: int) -> Struct:
    """A pool ad for the wire: as a job ad is (``convert_ad_to_adStruct``), with the ad's own MyType and TargetType
    first."""
    return ad_to_struct(ad, now, my_type=literal_string(ad, "MyType"), target_type=literal_string(ad, "TargetType"))

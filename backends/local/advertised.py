"""Ads other programs advertised to the gateway's collector (the condorCollector ``insertAd``), kept as HTCondor's
collector keeps daemons' updates.

An ad is known by its kind and its key (``Name``, or ``Machine`` for startds and masters, plus ``ScheddName`` for a
submitter, and ``MyAddress`` when it has one, after HTCondor's hash keys); a later ad with the same key replaces it.
The collector stamps each ad with ``LastHeardFrom`` and forgets it once ``ClassAdLifetime`` seconds (the ad's own
value, else ``CLASSAD_LIFETIME``) have passed without a new update.  Ads live in memory only, as in a collector:
a restart forgets them, and their daemons advertise again.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable

import classad2

from backends.interface import BackendError
from jobmodel.classads import copy_ad, literal_string
from jobmodel.pool import KEY_EXTRA, KEY_FALLBACK, NAME, AdType

Key = tuple[AdType, str, str, str]


class AdRefused(BackendError):
    """An advertised ad the collector does not keep (no name to key it by, or no room); the message says which."""


def ad_key(ad_type: AdType, ad: classad2.ClassAd) -> Key:
    """What tells this ad from the others of its kind; AdRefused when it has nothing to be known by."""
    name = literal_string(ad, NAME) or literal_string(ad, KEY_FALLBACK.get(ad_type, NAME))
    if not name:
        fallback = KEY_FALLBACK.get(ad_type)
        needs = f"{NAME} (or {fallback})" if fallback else NAME
        raise AdRefused(f"the ad has no {needs} string to be known by")
    extra = KEY_EXTRA.get(ad_type)
    return ad_type, name, literal_string(ad, extra) if extra else "", literal_string(ad, "MyAddress")


def _literal(ad: classad2.ClassAd, attribute: str) -> object:
    """An attribute's value when it is a literal, else None: nothing a client wrote is evaluated here."""
    value = ad.get(attribute)
    return None if isinstance(value, (classad2.ExprTree, classad2.Value)) else value


@dataclass
class _Kept:
    ad: classad2.ClassAd
    expires: float


class AdvertisedAds:
    """The advertised ads, at most ``capacity`` of them, each living ``lifetime`` seconds of ``clock`` unless it says
    otherwise.  Safe to use from several threads (queries run on the query pool)."""

    def __init__(self, clock: Callable[[], float], lifetime: float, capacity: int) -> None:
        if lifetime <= 0 or capacity < 0:
            raise ValueError(f"classad_lifetime must be positive and max_advertised_ads not negative, not "
                             f"{lifetime!r} and {capacity!r}")
        self._clock = clock
        self._lifetime = lifetime
        self._capacity = capacity
        self._ads: dict[Key, _Kept] = {}
        self._lock = threading.Lock()

    def advertise(self, ad_type: AdType, ad: classad2.ClassAd) -> bool:
        """Keep ``ad`` (a copy, stamped ``LastHeardFrom``), replacing the one with its key; True when it is new."""
        key = ad_key(ad_type, ad)
        now = self._clock()
        kept = copy_ad(ad)
        kept["LastHeardFrom"] = int(now)
        expires = now + self._lifetime_of(ad)
        with self._lock:
            self._expire(now)
            new = key not in self._ads
            if new and len(self._ads) >= self._capacity:
                raise AdRefused(f"the collector already holds its limit of {self._capacity} advertised ads "
                                f"(max_advertised_ads); try again once some expire")
            self._ads[key] = _Kept(kept, expires)
        return new

    def ads(self, ad_type: AdType) -> list[classad2.ClassAd]:
        """The live ads of one kind (``AdType.ANY``: of every kind), oldest key first."""
        with self._lock:
            self._expire(self._clock())
            return [kept.ad for key, kept in self._ads.items() if ad_type is AdType.ANY or key[0] is ad_type]

    def _lifetime_of(self, ad: classad2.ClassAd) -> float:
        """The ad's own ``ClassAdLifetime`` when it is a positive number (a literal), else the collector's."""
        own = _literal(ad, "ClassAdLifetime")
        if isinstance(own, (int, float)) and not isinstance(own, bool) and own > 0:
            return float(own)
        return self._lifetime

    def _expire(self, now: float) -> None:
        for key in [key for key, kept in self._ads.items() if kept.expires <= now]:
            del self._ads[key]

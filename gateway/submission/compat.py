"""Workarounds for spyne 2.14 (last released 2022) on current Python and Twisted, kept in one place.

Each workaround says what upstream does wrong; ``tests/test_soap_compat.py`` has a test per workaround that
fails once upstream no longer needs it, so it can be dropped.
"""

from __future__ import annotations

import logging

_installed = False


def install() -> None:
    """Apply every workaround once (idempotent)."""
    global _installed
    if _installed:
        return
    _quiet_client_fault_tracebacks()
    _no_collection_per_request()
    _installed = True


#: loggers on which spyne writes a full traceback at ERROR for every request a client got wrong
NOISY_LOGGERS = ("spyne.server._base", "spyne.application.client", "spyne.protocol.soap.soap11.invalid")


def _quiet_client_fault_tracebacks() -> None:
    """spyne logs each client mistake (bad XML, a bad value) as an ERROR with a traceback; the gateway logs
    every request with its fault itself, so those records are only noise (and a cheap way to fill a disk)."""
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)


def _no_collection_per_request() -> None:
    """spyne runs a full ``gc.collect()`` whenever it closes a request's context and a second has passed since the
    last (``MIN_GC_INTERVAL``, to close the files of its own file uploads, which the gateway has none of).  On the
    gateway's one serving thread that is a pause of tens of milliseconds every second, which every request in flight
    waits out; Python's own collector frees cycles as it always does."""
    from spyne import const

    const.MIN_GC_INTERVAL = float("inf")

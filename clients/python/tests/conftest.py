"""The client's tests run against the real gateway of this repository, started as a separate process by
``gateway.testing`` (installed with the gateway; nothing is imported from the gateway's own test suite)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gateway.testing import module_gateway, start_gateway

os.environ.setdefault("CONDOR_CONFIG", "/dev/null")

#: HTCondor's shipped WSDL, kept with the repository's test data (see tests/data/README.md)
LEGACY_WSDL = Path(__file__).resolve().parents[3] / "tests" / "data" / "legacy" / "condorSchedd-7.2.4.wsdl"

RUNNER = ("[backends.local]\nslots = 2\nkill_grace = 1.0\nperiodic_interval = 0.5\n"
          "[birdbath]\nqueue_all_users_trusted = true\n")


__all__ = ["LEGACY_WSDL", "start_gateway"]

gateway = module_gateway(RUNNER, scope="session")


@pytest.fixture(scope="session")
def schedd(gateway):
    from birdbath_client import Schedd

    return Schedd(gateway.url)

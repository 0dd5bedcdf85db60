"""The client's tests run against the real gateway of this repository, started as a separate process."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))
os.environ.setdefault("CONDOR_CONFIG", "/dev/null")

from tests.conftest import LEGACY_WSDL, GatewayProcess  # noqa: E402

RUNNER = ("[backends.local]\nslots = 2\nkill_grace = 1.0\nperiodic_interval = 0.5\n"
          "[birdbath]\nqueue_all_users_trusted = true\n")

__all__ = ["LEGACY_WSDL"]


@pytest.fixture(scope="session")
def gateway(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("client-gateway")
    process = GatewayProcess(tmp / "state", RUNNER, tmp=tmp).start()
    yield process
    process.stop()


@pytest.fixture(scope="session")
def schedd(gateway):
    from birdbath_client import Schedd

    return Schedd(gateway.url)

"""The client's tests run against the real gateway of this repository, started as a separate process."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))
os.environ.setdefault("CONDOR_CONFIG", "/dev/null")

from tests.conftest import LEGACY_WSDL, module_gateway  # noqa: E402

RUNNER = ("[backends.local]\nslots = 2\nkill_grace = 1.0\nperiodic_interval = 0.5\n"
          "[birdbath]\nqueue_all_users_trusted = true\n")

__all__ = ["LEGACY_WSDL"]


gateway = module_gateway(RUNNER, scope="session")


@pytest.fixture(scope="session")
def schedd(gateway):
    from birdbath_client import Schedd

    return Schedd(gateway.url)

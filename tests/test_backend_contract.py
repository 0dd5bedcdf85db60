"""The local backend keeps the backend contract (backends/contract.py)."""

from __future__ import annotations

import pytest

from backends.contract import BackendContract
from backends.local import LocalBackend


class TestLocalBackendContract(BackendContract):
    @pytest.fixture
    def backend(self, tmp_path):
        backend = LocalBackend(tmp_path, slots=0)
        yield backend
        backend.close()

"""Backends are checked against the interface when they are loaded: a missing part is named, not found later."""

from __future__ import annotations

import pytest

from backends.interface import REQUIRED_METHODS, Capability, IncompleteBackend, check
from backends.local import LocalBackend


def complete(capabilities=frozenset()):
    """A class with every required method and attribute, declaring ``capabilities``."""
    members = {name: (lambda self, *args: None) for name in REQUIRED_METHODS}
    members.update(threads=1, call_timeout=None, capabilities=frozenset(capabilities))
    return type("Complete", (), members)


def test_a_complete_backend_passes_and_is_returned():
    backend = complete()()
    assert check(backend) is backend


def test_a_missing_method_and_attribute_are_named():
    members = {name: value for name, value in vars(complete()).items() if name not in ("read_job_file", "threads")}
    with pytest.raises(IncompleteBackend, match=r"the mine backend .*missing threads, read_job_file"):
        check(type("Partial", (), members)(), "mine")


def test_a_declared_capability_needs_its_methods():
    with pytest.raises(IncompleteBackend, match=r"missing start \(for SERVICES\), stop \(for SERVICES\)"):
        check(complete({Capability.SERVICES})())
    with_history = complete({Capability.HISTORY})
    with_history.history = lambda self, constraint, limit=None: []
    check(with_history())


def test_capabilities_must_be_capabilities():
    with pytest.raises(IncompleteBackend, match="unknown capabilities"):
        check(complete({"history"})())


def test_the_local_backend_is_complete(tmp_path):
    backend = LocalBackend(tmp_path, slots=0)
    try:
        assert check(backend).capabilities == {Capability.SERVICES, Capability.HISTORY, Capability.POOL,
                                               Capability.FIGURES, Capability.CHANGES}
    finally:
        backend.close()


def test_the_htcondor_backend_is_complete(tmp_path):
    from tests.htcondor_standin import FakePool
    from tests.test_htcondor_backend import make

    backend = make(tmp_path, FakePool())
    try:
        assert check(backend).capabilities == {Capability.HISTORY, Capability.POOL}
    finally:
        backend.close()


def test_no_method_takes_a_transaction_object():
    """The backend gets a transaction whole (commit's Batch): no call names an open transaction of its own."""
    import inspect

    from backends.interface import ScheddBackend

    for name in REQUIRED_METHODS:
        assert "txn" not in inspect.signature(getattr(ScheddBackend, name)).parameters, name

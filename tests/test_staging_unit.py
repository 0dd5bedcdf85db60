"""Staging areas of the submission API (gateway.core.submissions) on a fake clock: an unused area expires after
staging_lifetime and its files go, every send renews it, abort ends it at once, only its creator uses it (and may
hold max_staging_areas_per_caller of them), and a staged job stays queued for output_retention after it finished.  The service runs in this process over the local backend; no gateway, no
sleeping.  tests/test_submission_api.py keeps one end-to-end expiry against a real gateway."""

from __future__ import annotations

import time
from collections.abc import Coroutine
from pathlib import Path

import pytest
from twisted.internet.defer import maybeDeferred
from twisted.internet.task import Clock

from backends.local import LocalBackend, lifecycle
from gateway.core.adstruct import Attr, AttrType
from gateway.core.auth import AccessPolicy, Authentication, Caller
from gateway.core.submissions import ApiError, ApiStatus, SubmissionService, SubmissionSettings
from tests.synchronous import run

LIFETIME = 100
RETENTION = 500
ALICE = Caller("127.0.0.1", "alice", Authentication.SOCKET)
BOB = Caller("127.0.0.1", "bob", Authentication.SOCKET)




@pytest.fixture
def backend(tmp_path):
    backend = LocalBackend(tmp_path / "state", schedd_name="test.example")
    yield backend
    backend.close()


def service_for(backend, clock, root: Path, policy: AccessPolicy | None = None,
                limit: int = 20) -> SubmissionService:
    call = maybeDeferred  # (the backend's thread, made synchronous)
    settings = SubmissionSettings("test.example", root, staging_lifetime=LIFETIME, output_retention=RETENTION,
                                  max_staging_areas_per_caller=limit)
    return SubmissionService(backend, call, policy or AccessPolicy(), clock, settings)


@pytest.fixture
def root(tmp_path) -> Path:
    return tmp_path / "staging"


@pytest.fixture
def service(backend, clock, root) -> SubmissionService:
    return service_for(backend, clock, root)


def no_match(operation: Coroutine) -> bool:
    try:
        run(operation)
    except ApiError as error:
        return error.code is ApiStatus.NO_MATCH
    return False


def test_an_unused_area_expires_after_the_staging_lifetime_and_its_files_go(service, clock, root):
    staging = run(service.create(ALICE, "batch"))
    assert run(service.send(ALICE, staging, "in.txt", 0, b"hello")) == 5
    area = root / staging
    assert (area / "in.txt").read_bytes() == b"hello"
    clock.advance(LIFETIME - 0.5)
    assert area.exists()
    clock.advance(1)
    assert not area.exists() and list(root.iterdir()) == []
    assert no_match(service.send(ALICE, staging, "in.txt", 5, b"more"))
    assert no_match(service.submit(ALICE, [Attr("Cmd", AttrType.STRING, "in.txt"),
                                           Attr("Requirements", AttrType.EXPRESSION, "TRUE")], staging))
    assert no_match(service.abort(ALICE, staging))
    assert clock.getDelayedCalls() == []


def test_an_area_with_no_files_expires_too(service, clock, root):
    staging = run(service.create(ALICE))
    assert (root / staging).is_dir()
    clock.advance(LIFETIME + 0.1)
    assert not (root / staging).exists()


def test_every_send_renews_the_lifetime(service, clock, root):
    staging = run(service.create(ALICE))
    for offset in range(5):  # 5 x 0.9 lifetimes: alive only because each send renewed it
        clock.advance(LIFETIME * 0.9)
        run(service.send(ALICE, staging, "data", offset, b"x"))
    assert (root / staging / "data").read_bytes() == b"xxxxx"
    clock.advance(LIFETIME - 0.5)
    assert (root / staging).exists()
    clock.advance(1)
    assert not (root / staging).exists()


def test_a_refused_send_does_not_renew(service, clock, root):
    staging = run(service.create(ALICE))
    clock.advance(LIFETIME * 0.9)
    with pytest.raises(ApiError, match="must not contain a path separator"):
        run(service.send(ALICE, staging, "../escape", 0, b"abc"))
    assert no_match(service.send(BOB, staging, "f", 0, b"abc"))
    clock.advance(LIFETIME * 0.2)
    assert not (root / staging).exists()


def test_areas_expire_independently(service, clock, root):
    first = run(service.create(ALICE))
    clock.advance(LIFETIME / 2)
    second = run(service.create(ALICE))
    clock.advance(LIFETIME / 2 + 0.1)
    assert not (root / first).exists() and (root / second).exists()
    clock.advance(LIFETIME / 2)
    assert not (root / second).exists()


def test_abort_removes_the_files_at_once_and_cancels_the_expiry(service, clock, root):
    staging = run(service.create(ALICE))
    run(service.send(ALICE, staging, "f", 0, b"data"))
    run(service.abort(ALICE, staging))
    assert not (root / staging).exists() and clock.getDelayedCalls() == []
    assert no_match(service.abort(ALICE, staging))


@pytest.mark.parametrize("other", [
    BOB,  # another user on the same host
    Caller("10.0.0.7", "alice", Authentication.CERTIFICATE),  # the same name, elsewhere
    Caller("127.0.0.1", "alice", Authentication.PASSWORD),  # the same name, identified another way
    Caller("127.0.0.1"),  # an anonymous client
    Caller("127.0.0.1", "root", Authentication.SOCKET),  # even a queue super user
])
def test_only_the_creator_uses_an_area_and_others_are_told_it_does_not_exist(backend, clock, root, other):
    service = service_for(backend, clock, root)
    staging = run(service.create(ALICE))
    run(service.send(ALICE, staging, "f", 0, b"mine"))
    assert no_match(service.send(other, staging, "f", 0, b"x"))
    assert no_match(service.submit(other, [Attr("Cmd", AttrType.STRING, "f"),
                                           Attr("Requirements", AttrType.EXPRESSION, "TRUE")], staging))
    assert no_match(service.abort(other, staging))
    assert (root / staging / "f").read_bytes() == b"mine" and backend.query(None) == []
    assert run(service.send(ALICE, staging, "f", 4, b"!")) == 5  # the creator still uses it


def test_trusted_queues_do_not_share_staging_areas(backend, clock, root):
    anonymous = Caller("127.0.0.1")
    service = service_for(backend, clock, root, AccessPolicy(queue_all_users_trusted=True))
    staging = run(service.create(anonymous))
    assert no_match(service.send(Caller("10.0.0.8"), staging, "f", 0, b"x"))  # another anonymous host
    assert run(service.send(anonymous, staging, "f", 0, b"x")) == 1


def test_a_caller_holds_at_most_max_staging_areas_per_caller(backend, clock, root):
    service = service_for(backend, clock, root, limit=2)
    first, _ = run(service.create(ALICE)), run(service.create(ALICE))
    with pytest.raises(ApiError) as refused:
        run(service.create(ALICE))
    assert refused.value.code is ApiStatus.FAIL
    assert "Too many staging areas" in refused.value.text and "max_staging_areas_per_caller" in refused.value.text
    assert len(list(root.iterdir())) == 2
    assert run(service.create(BOB))  # the limit is per caller
    run(service.abort(ALICE, first))  # ending one makes room again
    third = run(service.create(ALICE))
    clock.advance(LIFETIME + 0.1)  # and so does expiry
    assert no_match(service.send(ALICE, third, "f", 0, b"x"))
    assert len({run(service.create(ALICE)), run(service.create(ALICE))}) == 2


def test_staging_areas_do_not_survive_a_restart(backend, clock, root):
    staging = run(service_for(backend, clock, root).create(ALICE))
    assert (root / staging).exists()
    restarted = service_for(backend, Clock(), root)
    assert list(root.iterdir()) == []
    assert no_match(restarted.send(ALICE, staging, "f", 0, b"x"))


def test_a_staged_submit_spools_the_files_and_the_area_lives_on_until_it_expires(service, backend, clock, root):
    staging = run(service.create(ALICE, "staged-batch"))
    run(service.send(ALICE, staging, "run.sh", 0, b"#!/bin/sh\necho hi\n"))
    run(service.send(ALICE, staging, "in.dat", 0, b"\x00\x01"))
    ads = [Attr("Cmd", AttrType.STRING, "run.sh"), Attr("Requirements", AttrType.EXPRESSION, "TRUE")]
    first = run(service.submit(ALICE, ads, staging))
    second = run(service.submit(ALICE, ads, staging))  # one area can feed several jobs
    assert first == "test.example#1.0" and second == "test.example#2.0"
    for cluster in (1, 2):
        ad = backend.get_job(cluster, 0)
        assert ad["Iwd"] == backend.spool_directory(cluster, 0) and ad["TransferInput"] == "run.sh,in.dat"
        assert ad["ShouldTransferFiles"] == "YES" and ad["Submission"] == "staged-batch" and ad["Owner"] == "alice"
        assert (Path(ad["Iwd"]) / "in.dat").read_bytes() == b"\x00\x01"
    clock.advance(LIFETIME + 0.1)  # submitting does not renew the area, and its expiry leaves the jobs alone
    assert not (root / staging).exists()
    assert (Path(backend.spool_directory(1, 0)) / "run.sh").exists()


def test_a_finished_staged_job_stays_queued_for_the_output_retention(service, backend):
    staging = run(service.create(ALICE))
    run(service.send(ALICE, staging, "run.sh", 0, b"#!/bin/sh\n"))
    run(service.submit(ALICE, [Attr("Cmd", AttrType.STRING, "run.sh"),
                               Attr("Requirements", AttrType.EXPRESSION, "TRUE")], staging))
    ad = backend.get_job(1, 0)
    assert str(ad.lookup("LeaveJobInQueue")) == (
        f"FilesRetrieved is false && (JobStatus == 3 || JobStatus == 4) && (time() - EnteredCurrentStatus) < "
        f"{RETENTION}")
    assert ad["FilesRetrieved"] is False
    now = int(time.time())  # the expression reads the real clock through ClassAd time()
    for status, entered, retrieved, leaves in (
            (4, now - 10, False, False), (3, now - 10, False, False), (4, now - RETENTION - 10, False, True),
            (3, now - RETENTION - 10, False, True),
            (4, now - 10, True, True), (3, now - 10, True, True)):  # closeSpool: the output was retrieved
        finished = lifecycle.updated(ad, {"JobStatus": status, "EnteredCurrentStatus": entered,
                                          "FilesRetrieved": retrieved})
        assert lifecycle.leaves_queue(finished) is leaves, (status, entered, retrieved)
    kept = [Attr("Cmd", AttrType.STRING, "run.sh"), Attr("Requirements", AttrType.EXPRESSION, "TRUE"),
            Attr("LeaveJobInQueue", AttrType.EXPRESSION, "false")]
    run(service.submit(ALICE, kept, staging))  # the client's own LeaveJobInQueue wins
    assert str(backend.get_job(2, 0).lookup("LeaveJobInQueue")) == "false"


def test_an_unstaged_submit_gets_no_retention(service, backend, tmp_path):
    run(service.submit(ALICE, [Attr("Cmd", AttrType.STRING, "/bin/true"), Attr("Iwd", AttrType.STRING, str(tmp_path)),
                               Attr("Requirements", AttrType.EXPRESSION, "TRUE")]))
    ad = backend.get_job(1, 0)
    assert "LeaveJobInQueue" not in ad and ad["ShouldTransferFiles"] == "NO"


def test_a_submit_is_one_call_on_the_backends_thread(backend, clock, root, tmp_path):
    """begin .. commit in one call (under load, each call waits its turn behind everyone else's work)."""
    calls: list[str] = []

    def call(function, *args, **kwargs):
        calls.append(getattr(function, "__name__", "?"))
        return maybeDeferred(function, *args, **kwargs)

    service = SubmissionService(backend, call, AccessPolicy(), clock, SubmissionSettings("test.example", root))
    job = [Attr("Cmd", AttrType.STRING, "/bin/true"), Attr("Requirements", AttrType.EXPRESSION, "TRUE")]
    assert run(service.submit(ALICE, job + [Attr("Iwd", AttrType.STRING, str(tmp_path))])) == "test.example#1.0"
    staging = run(service.create(ALICE))
    run(service.send(ALICE, staging, "in.dat", 0, b"data"))
    calls.clear()
    assert run(service.submit(ALICE, job, staging)) == "test.example#2.0"
    assert calls == ["_write"]  # (QueueWriter._write: the files copied in, then the commit)
    assert (Path(backend.spool_directory(2, 0)) / "in.dat").read_bytes() == b"data"

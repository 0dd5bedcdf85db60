"""The owner rules of both APIs (gateway.core.auth.AccessPolicy), in this process over the local backend: who may
submit as which Owner, act on and read whose jobs, which attributes only the schedd sets, and whose transactions and
staging areas a caller may use.  Each rule has its refusal next to what it allows; the issue's reproductions are
here, each refused.  A few run end to end through a real gateway at the end."""

from __future__ import annotations

import base64
import json
import os
import urllib.request
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import classad2
import pytest
from twisted.internet.defer import maybeDeferred

from backends.local import LocalBackend
from gateway.core.adstruct import Attr, AttrType
from gateway.core.auth import (
    SCHEDD_OWNED,
    AccessPolicy,
    Authentication,
    Caller,
    NotOwner,
    OwnerUse,
    replaced_at_submit,
    schedd_owned,
)
from gateway.core.schedd import BirdbathSchedd, ScheddSettings
from gateway.core.status import BirdbathError, StatusCode
from gateway.core.submissions import ApiError, ApiStatus, SubmissionService, SubmissionSettings
from gateway.core.transactions import TransactionRef
from gateway.testing import QUEUE_ONLY
from jobmodel.jobs import JobAction, JobStatus, Universe
from tests.synchronous import run

SCHEDD_NAME = "test.example"
ALICE = Caller("127.0.0.1", "alice", Authentication.SOCKET)
BOB = Caller("127.0.0.1", "bob", Authentication.SOCKET)
ROOT = Caller("127.0.0.1", "root", Authentication.SOCKET)
CONDOR = Caller("10.0.0.5", "condor@example.org", Authentication.CERTIFICATE)  # a queue super user, not root
ANONYMOUS = Caller("10.0.0.9")  # a remote client over plain HTTP: gets default_owner
GUEST = "guest"  # the default_owner of these tests


def policy(trusted: bool = False, default_owner: str = GUEST) -> AccessPolicy:
    return AccessPolicy(queue_all_users_trusted=trusted, default_owner=default_owner)


# -- the rule itself ---------------------------------------------------------------------------------------
#: (caller, owner, use, trusted) -> allowed; every refusal next to what the same caller may do
RULES = [
    (ALICE, "alice", OwnerUse.SUBMIT, False, True),
    (ALICE, "bob", OwnerUse.SUBMIT, False, False),
    (ALICE, "bob", OwnerUse.SUBMIT, True, False),  # queue_all_users_trusted is for anonymous callers only
    (ALICE, "alice", OwnerUse.ACT, False, True),
    (ALICE, "bob", OwnerUse.ACT, False, False),
    (ALICE, "root", OwnerUse.ACT, False, False),
    (Caller("10.1.1.1", "alice@example.org", Authentication.CERTIFICATE), "alice", OwnerUse.SUBMIT, False, True),
    (Caller("10.1.1.1", "alice@example.org", Authentication.CERTIFICATE), "bob", OwnerUse.ACT, False, False),
    (ROOT, "root", OwnerUse.SUBMIT, False, True),
    (ROOT, "alice", OwnerUse.SUBMIT, False, True),  # root is a queue super user
    (ROOT, "alice", OwnerUse.ACT, False, True),
    (CONDOR, "alice", OwnerUse.SUBMIT, False, True),
    (CONDOR, "alice", OwnerUse.ACT, False, True),
    (CONDOR, "root", OwnerUse.ACT, False, True),  # super users act on root's jobs...
    (CONDOR, "root", OwnerUse.SUBMIT, False, False),  # ...but only root makes them
    (ANONYMOUS, GUEST, OwnerUse.SUBMIT, False, True),
    (ANONYMOUS, GUEST, OwnerUse.ACT, False, True),
    (ANONYMOUS, "alice", OwnerUse.SUBMIT, False, False),
    (ANONYMOUS, "alice", OwnerUse.ACT, False, False),
    (ANONYMOUS, "alice", OwnerUse.SUBMIT, True, True),
    (ANONYMOUS, "alice", OwnerUse.ACT, True, True),
    (ANONYMOUS, "root", OwnerUse.SUBMIT, True, False),  # trusted anonymous callers never use root
    (ANONYMOUS, "root", OwnerUse.ACT, True, False),
    (Caller("127.0.0.1", "root"), "root", OwnerUse.SUBMIT, True, False),  # a name that was not verified
    (Caller("127.0.0.1", "condor"), "alice", OwnerUse.SUBMIT, False, False),  # no super user unless identified
    (ALICE, None, OwnerUse.ACT, False, False),  # a job without an Owner is nobody's
    (ROOT, None, OwnerUse.ACT, False, True),
]


@pytest.mark.parametrize("caller, owner, use, trusted, allowed", RULES)
def test_the_owner_rule(caller, owner, use, trusted, allowed):
    refusal = policy(trusted).owner_refusal(caller, owner, use)
    assert (refusal is None) is allowed, refusal
    if not allowed:
        assert use.value in refusal and (repr(owner) if owner else "no Owner") in refusal


def test_refusals_say_who_and_why():
    strict = policy()
    assert strict.owner_refusal(ALICE, "bob", OwnerUse.SUBMIT) == (
        "user 'alice' may not submit jobs owned by 'bob': only its own ('alice'), as it is not in queue_super_users")
    assert strict.owner_refusal(ANONYMOUS, "alice", OwnerUse.ACT) == (
        "an anonymous client may not act on jobs owned by 'alice': anonymous clients use default_owner 'guest' "
        "(queue_all_users_trusted is false)")
    assert strict.owner_refusal(CONDOR, "root", OwnerUse.SUBMIT) == (
        "user 'condor@example.org' may not submit jobs owned by 'root': only a caller identified as root may")
    assert strict.owner_refusal(ALICE, "root", OwnerUse.ACT) == (
        "user 'alice' may not act on jobs owned by 'root': only root and the queue super users may")


def test_the_owner_of_a_submission():
    strict = policy()
    assert strict.submit_owner(ALICE, None) == "alice"
    assert strict.submit_owner(ALICE, classad2.Value.Undefined) == "alice"  # UNDEFINED: the caller's own
    assert strict.submit_owner(ANONYMOUS, None) == GUEST
    assert strict.submit_owner(ROOT, "alice") == "alice"
    with pytest.raises(NotOwner, match="may not submit jobs owned by 'bob'"):
        strict.submit_owner(ALICE, "bob")
    with pytest.raises(NotOwner, match="must be a string"):
        strict.submit_owner(ALICE, classad2.ExprTree("strcat(\"ro\", \"ot\")"))
    # an anonymous default_owner of root is no way around the rule: its jobs would be root's
    with pytest.raises(NotOwner, match="only a caller identified as root"):
        policy(default_owner="root").submit_owner(ANONYMOUS, None)
    assert policy(default_owner="root").submit_owner(ROOT, None) == "root"


def test_schedd_owned_attributes_ignore_case():
    for name in ("Owner", "owner", "USER", "ClusterId", "procid", "GlobalJobId", "QDate", "JobStatus", "ClaimId"):
        assert schedd_owned(name), name
    for name in ("User", "user", "ClusterId", "QDATE", "EnteredCurrentStatus", "GlobalJobId", "MyType"):
        assert replaced_at_submit(name), name
    assert not replaced_at_submit("Owner") and not replaced_at_submit("JobStatus")  # checked / kept at submit
    for name in ("Cmd", "Out", "Err", "Iwd", "Submission", "FilesRetrieved", "Note"):
        assert not schedd_owned(name) and not replaced_at_submit(name), name
    assert {"Owner", "User", "ClusterId", "ProcId", "GlobalJobId", "QDate", "EnteredCurrentStatus"} <= SCHEDD_OWNED


# -- Birdbath --------------------------------------------------------------------------------------------------
@pytest.fixture
def backend(tmp_path, clock):
    backend = LocalBackend(tmp_path / "state", schedd_name=SCHEDD_NAME, clock=clock.seconds, slots=0)
    yield backend
    backend.close()


def schedd_for(backend, clock, access: AccessPolicy | None = None, limit: int = 20) -> BirdbathSchedd:
    call = maybeDeferred  # (the backend's thread, made synchronous)
    return BirdbathSchedd(backend, call, access or policy(), clock, ScheddSettings(max_transactions_per_caller=limit))


@pytest.fixture
def schedd(backend, clock) -> BirdbathSchedd:
    return schedd_for(backend, clock)


def ref(txn) -> TransactionRef:
    return TransactionRef(txn.id, txn.duration)


def outcome(operation: Coroutine) -> tuple[StatusCode, str]:
    """The status an operation answers with."""
    try:
        run(operation)
    except BirdbathError as error:
        return error.status.code, error.status.message or ""
    return StatusCode.SUCCESS, "Success"


def birdbath_submit(schedd: BirdbathSchedd, caller: Caller, procs: int = 1, owners: tuple[str | None, ...] = (),
                    **attributes: str) -> tuple[int, int]:
    """One committed cluster of ``caller`` (a spooled file "in" per job); proc i gets Owner owners[i] if given."""
    txn = run(schedd.begin_transaction(caller, 60))
    cluster = run(schedd.new_cluster(caller, ref(txn)))
    for index in range(procs):
        proc = run(schedd.new_job(caller, ref(txn), cluster))
        run(schedd.declare_file(caller, ref(txn), cluster, proc, "in", 4, None))
        run(schedd.send_file(caller, ref(txn), cluster, proc, "in", 0, b"data"))
        attrs = [Attr("Cmd", AttrType.STRING, "/bin/true"), Attr("Requirements", AttrType.EXPRESSION, "FALSE")]
        attrs += [Attr(name, AttrType.STRING, value) for name, value in attributes.items()]
        if index < len(owners) and owners[index] is not None:
            attrs.append(Attr("Owner", AttrType.STRING, owners[index]))
        run(schedd.submit(caller, ref(txn), cluster, proc, attrs))
    run(schedd.commit_transaction(caller, ref(txn)))
    return cluster, 0


#: the operations stub_prefix step 5 guards, each run by ``caller`` on a committed job (in a transaction of the
#: caller's own where the operation needs one)
STEP_5: dict[str, Callable[[BirdbathSchedd, Caller, Any, int, int], Coroutine]] = {
    "declareFile": lambda s, c, t, cl, p: s.declare_file(c, ref(t), cl, p, "more", 1, None),
    "sendFile": lambda s, c, t, cl, p: s.send_file(c, ref(t), cl, p, "in", 0, b"x"),
    "removeJob": lambda s, c, t, cl, p: s.remove_job(c, None, cl, p, "gone"),
    "holdJob": lambda s, c, t, cl, p: s.hold_job(c, None, cl, p, "held", False),
    "releaseJob": lambda s, c, t, cl, p: s.release_job(c, None, cl, p, "go"),
    "getJobAd": lambda s, c, t, cl, p: s.get_job_ad(c, None, cl, p),
    "getFile": lambda s, c, t, cl, p: s.get_file(c, None, cl, p, "in", 0, 4),
    "closeSpool": lambda s, c, t, cl, p: s.close_spool(c, None, cl, p),
    "listSpool": lambda s, c, t, cl, p: s.list_spool(c, None, cl, p),
}
#: what the owner gets from each of them on its own job (declareFile and sendFile need a job of the transaction)
OWN = {"declareFile": StatusCode.UNKNOWNJOB, "sendFile": StatusCode.UNKNOWNJOB,
       "releaseJob": StatusCode.FAIL}  # releasing a job that is not held


@pytest.mark.parametrize("operation", list(STEP_5))
def test_step_5_refuses_another_owners_job_and_serves_the_owner(schedd, backend, operation):
    cluster, proc = birdbath_submit(schedd, ALICE)
    before = backend.get_job(cluster, proc)
    mallory_txn = run(schedd.begin_transaction(BOB, 60))
    assert outcome(STEP_5[operation](schedd, BOB, mallory_txn, cluster, proc)) == (StatusCode.FAIL, "Not job owner")
    assert backend.get_job(cluster, proc) == before  # nothing changed: not removed, held, FilesRetrieved...
    own_txn = run(schedd.begin_transaction(ALICE, 60))
    code, message = outcome(STEP_5[operation](schedd, ALICE, own_txn, cluster, proc))
    assert code is OWN.get(operation, StatusCode.SUCCESS) and message != "Not job owner", message


@pytest.mark.parametrize("caller, trusted", [(ROOT, False), (CONDOR, False), (ANONYMOUS, True)])
def test_super_users_and_trusted_anonymous_callers_act_on_any_job(backend, clock, caller, trusted):
    schedd = schedd_for(backend, clock, policy(trusted))
    cluster, proc = birdbath_submit(schedd, ALICE)
    assert outcome(schedd.hold_job(caller, None, cluster, proc, "by an admin", False))[0] is StatusCode.SUCCESS
    assert backend.get_job(cluster, proc)["JobStatus"] == JobStatus.HELD
    assert run(schedd.get_file(caller, None, cluster, proc, "in", 0, 4)) == b"data"


def test_an_anonymous_remove_of_another_owners_job_is_refused(schedd, backend):
    """The issue's reproduction: an anonymous removeJob of another owner's job succeeded."""
    cluster, proc = birdbath_submit(schedd, ALICE)
    assert outcome(schedd.remove_job(ANONYMOUS, None, cluster, proc, "mine now")) == (StatusCode.FAIL,
                                                                                       "Not job owner")
    assert backend.get_job(cluster, proc)["JobStatus"] == JobStatus.IDLE
    own = birdbath_submit(schedd, ANONYMOUS)  # the default owner's jobs are the anonymous clients' own
    assert outcome(schedd.remove_job(ANONYMOUS, None, *own, "done"))[0] is StatusCode.SUCCESS


def test_root_jobs_are_not_for_anonymous_callers_even_trusted(backend, clock):
    schedd = schedd_for(backend, clock, policy(trusted=True))
    cluster, proc = birdbath_submit(schedd, ROOT)
    assert backend.get_job(cluster, proc)["Owner"] == "root"
    for caller in (ANONYMOUS, ALICE):
        assert outcome(schedd.get_file(caller, None, cluster, proc, "in", 0, 4)) == (StatusCode.FAIL, "Not job owner")
    assert outcome(schedd.remove_job(CONDOR, None, cluster, proc, "admin"))[0] is StatusCode.SUCCESS


def test_get_job_ads_is_not_filtered(schedd):
    cluster, _ = birdbath_submit(schedd, ALICE)
    ads = run(schedd.get_job_ads(BOB, None, f"ClusterId == {cluster}"))
    assert [dict((a.name, a.value) for a in ad)["Owner"] for ad in ads] == ["alice"]


def test_a_job_of_the_callers_own_transaction_needs_no_lookup(schedd, backend):
    """Jobs the transaction created are not in the committed queue; acting on them inside it works as before."""
    txn = run(schedd.begin_transaction(BOB, 60))
    cluster = run(schedd.new_cluster(BOB, ref(txn)))
    proc = run(schedd.new_job(BOB, ref(txn), cluster))
    run(schedd.submit(BOB, ref(txn), cluster, proc, [Attr("Cmd", AttrType.STRING, "/bin/true")]))
    run(schedd.hold_job(BOB, ref(txn), cluster, proc, "later", False))
    assert [f.name for f in run(schedd.list_spool(BOB, ref(txn), cluster, proc))] == []
    run(schedd.commit_transaction(BOB, ref(txn)))
    assert backend.get_job(cluster, proc)["JobStatus"] == JobStatus.HELD


def test_the_spool_of_another_callers_uncommitted_job_is_unknown(schedd):
    """Files sent in an open transaction are that client's: no committed job owns them yet, so step 5 alone would
    let anyone read them (the cluster id is easy to guess)."""
    txn = run(schedd.begin_transaction(ALICE, 60))
    cluster = run(schedd.new_cluster(ALICE, ref(txn)))
    proc = run(schedd.new_job(ALICE, ref(txn), cluster))
    run(schedd.declare_file(ALICE, ref(txn), cluster, proc, "secret.txt", 6, None))
    run(schedd.send_file(ALICE, ref(txn), cluster, proc, "secret.txt", 0, b"s3cret"))
    for caller in (BOB, ROOT):  # not even a super user: there is no job yet
        assert outcome(schedd.list_spool(caller, None, cluster, proc)) == (StatusCode.UNKNOWNJOB, "Unknown job")
        assert outcome(schedd.get_file(caller, None, cluster, proc, "secret.txt", 0, 6)) == (
            StatusCode.UNKNOWNJOB, "Unknown job")
    assert run(schedd.get_file(ALICE, ref(txn), cluster, proc, "secret.txt", 0, 6)) == b"s3cret"
    run(schedd.submit(ALICE, ref(txn), cluster, proc, [Attr("Cmd", AttrType.STRING, "/bin/true"),
                                                       Attr("Requirements", AttrType.EXPRESSION, "FALSE")]))
    run(schedd.commit_transaction(ALICE, ref(txn)))
    assert run(schedd.get_file(ALICE, None, cluster, proc, "secret.txt", 0, 6)) == b"s3cret"
    assert outcome(schedd.get_file(BOB, None, cluster, proc, "secret.txt", 0, 6)) == (StatusCode.FAIL, "Not job owner")


def test_remove_cluster_needs_every_job_of_the_cluster(schedd, backend):
    cluster, _ = birdbath_submit(schedd, ROOT, procs=2, owners=("alice", "bob"))
    code, message = outcome(schedd.remove_cluster(ALICE, None, cluster, "mine"))
    assert (code, message) == (StatusCode.FAIL,
                               f"Not cluster owner: job {cluster}.1 of cluster {cluster} has another owner")
    assert [backend.get_job(cluster, p)["JobStatus"] for p in (0, 1)] == [JobStatus.IDLE] * 2  # nothing removed
    own, _ = birdbath_submit(schedd, ALICE, procs=2)
    assert outcome(schedd.remove_cluster(ALICE, None, own, "done"))[0] is StatusCode.SUCCESS
    assert outcome(schedd.remove_cluster(CONDOR, None, cluster, "admin"))[0] is StatusCode.SUCCESS
    # as HTCondor's stub: an authenticated caller (soap->user) is told, an anonymous one has nothing to remove
    assert outcome(schedd.remove_cluster(ALICE, None, 999, "nothing")) == (StatusCode.FAIL, "Cluster not found")
    assert outcome(schedd.remove_cluster(ANONYMOUS, None, 999, "nothing"))[0] is StatusCode.SUCCESS


@pytest.mark.parametrize("caller, owner, trusted, allowed", [
    (ALICE, "alice", False, True), (ALICE, "bob", False, False),
    (ROOT, "alice", False, True), (CONDOR, "root", False, False), (ROOT, "root", False, True),
    (ANONYMOUS, "alice", False, False), (ANONYMOUS, "alice", True, True), (ANONYMOUS, "root", True, False),
])
def test_birdbath_submit_checks_the_owner(backend, clock, caller, owner, trusted, allowed):
    schedd = schedd_for(backend, clock, policy(trusted))
    txn = run(schedd.begin_transaction(caller, 60))
    cluster = run(schedd.new_cluster(caller, ref(txn)))
    proc = run(schedd.new_job(caller, ref(txn), cluster))
    code, message = outcome(schedd.submit(caller, ref(txn), cluster, proc, [Attr("Cmd", AttrType.STRING, "/bin/true"),
                                                                             Attr("Owner", AttrType.STRING, owner)]))
    if allowed:
        assert code is StatusCode.SUCCESS
        run(schedd.commit_transaction(caller, ref(txn)))
        assert backend.get_job(cluster, proc)["Owner"] == owner
    else:
        assert code is StatusCode.FAIL and message.startswith(f"Failed to set job {cluster}.{proc}'s Owner attribute: ")
        assert f"may not submit jobs owned by {owner!r}" in message


def test_an_anonymous_default_owner_of_root_cannot_submit(backend, clock):
    schedd = schedd_for(backend, clock, policy(trusted=True, default_owner="root"))
    txn = run(schedd.begin_transaction(ANONYMOUS, 60))
    cluster = run(schedd.new_cluster(ANONYMOUS, ref(txn)))
    proc = run(schedd.new_job(ANONYMOUS, ref(txn), cluster))
    code, message = outcome(schedd.submit(ANONYMOUS, ref(txn), cluster, proc, [Attr("Cmd", AttrType.STRING, "x")]))
    assert code is StatusCode.FAIL and "only a caller identified as root" in message


def test_a_submitted_user_and_ids_are_replaced_by_the_schedds(schedd, backend, clock):
    """The issue's reproduction: a Birdbath submit with User="root@evil" was committed with that User."""
    clock.advance(100)
    forged = dict(User="root@evil", GlobalJobId="evil#1.0#1", QDate="1", EnteredCurrentStatus="1", ClusterId="4242",
                  ProcId="7", MyType="Machine", ClaimId="stolen")
    txn = run(schedd.begin_transaction(ALICE, 60))
    cluster = run(schedd.new_cluster(ALICE, ref(txn)))
    proc = run(schedd.new_job(ALICE, ref(txn), cluster))
    attrs = [Attr("Cmd", AttrType.STRING, "/bin/true"), Attr("user", AttrType.STRING, "root@evil")]  # any case
    attrs += [Attr(name, AttrType.STRING if name in ("User", "GlobalJobId", "MyType", "ClaimId") else
                   AttrType.INTEGER, value) for name, value in forged.items()]
    run(schedd.submit(ALICE, ref(txn), cluster, proc, attrs))  # accepted, not refused: legacy clients send these
    run(schedd.commit_transaction(ALICE, ref(txn)))
    ad = backend.get_job(cluster, proc)
    assert ad["Owner"] == "alice" and ad["User"].startswith("alice@") and "evil" not in ad["User"]
    assert (ad["ClusterId"], ad["ProcId"]) == (cluster, proc) and "ClaimId" not in ad and "MyType" not in ad
    assert ad["QDate"] == ad["EnteredCurrentStatus"] == int(clock.seconds())
    assert ad["GlobalJobId"].startswith(f"{SCHEDD_NAME}#{cluster}.{proc}#")


def test_a_create_job_template_ad_sent_back_is_accepted_with_the_schedds_values(schedd, backend, clock):
    txn = run(schedd.begin_transaction(ALICE, 60))
    cluster = run(schedd.new_cluster(ALICE, ref(txn)))
    proc = run(schedd.new_job(ALICE, ref(txn), cluster))
    template = run(schedd.create_job_template(ALICE, cluster, proc, "alice", Universe.VANILLA, "/bin/true", None,
                                              None))
    clock.advance(30)  # the template's QDate is older than the queue's
    run(schedd.submit(ALICE, ref(txn), cluster, proc, template.ad))
    run(schedd.commit_transaction(ALICE, ref(txn)))
    ad = backend.get_job(cluster, proc)
    assert ad["Owner"] == "alice" and ad["QDate"] == int(clock.seconds()) and ad["Cmd"] == "/bin/true"


# -- transactions belong to their caller -----------------------------------------------------------------------
def test_another_callers_transaction_is_invalid_for_every_use(schedd, backend):
    """The issue's reproduction: own id - 1 was another client's transaction, which could be extended, committed
    and aborted.  Ids are random now, and even a known id is refused to anyone but its caller."""
    victim = run(schedd.begin_transaction(ALICE, 60))
    cluster = run(schedd.new_cluster(ALICE, ref(victim)))
    proc = run(schedd.new_job(ALICE, ref(victim), cluster))
    run(schedd.submit(ALICE, ref(victim), cluster, proc, [Attr("Cmd", AttrType.STRING, "/bin/true")]))
    mine = run(schedd.begin_transaction(BOB, 60))
    for txn_id in (mine.id - 1, victim.id):
        stolen = TransactionRef(txn_id, 60)
        for operation in (schedd.extend_transaction(BOB, stolen, 600), schedd.commit_transaction(BOB, stolen),
                          schedd.abort_transaction(BOB, stolen), schedd.new_cluster(BOB, stolen),
                          schedd.get_job_ads(BOB, stolen, None),
                          schedd.submit(BOB, stolen, cluster, proc, [Attr("Cmd", AttrType.STRING, "/bin/evil")])):
            assert outcome(operation) == (StatusCode.INVALIDTRANSACTION, "Invalid transaction")
    for stranger in (ANONYMOUS, Caller("10.0.0.5", "alice", Authentication.CERTIFICATE)):
        assert outcome(schedd.abort_transaction(stranger, ref(victim)))[0] is StatusCode.INVALIDTRANSACTION
    run(schedd.commit_transaction(ALICE, ref(victim)))  # the victim's transaction is intact
    assert backend.get_job(cluster, proc)["Cmd"] == "/bin/true"


def test_a_caller_holds_at_most_max_transactions_per_caller(backend, clock):
    schedd = schedd_for(backend, clock, limit=2)
    first, _ = run(schedd.begin_transaction(ALICE, 60)), run(schedd.begin_transaction(ALICE, 60))
    code, message = outcome(schedd.begin_transaction(ALICE, 60))
    assert code is StatusCode.FAIL and message.startswith("Maximum number of transactions reached")
    assert "max_transactions_per_caller" in message and len(schedd.transactions) == 2
    assert run(schedd.begin_transaction(BOB, 60))  # the limit is per caller
    run(schedd.abort_transaction(ALICE, ref(first)))  # ending one makes room
    assert run(schedd.begin_transaction(ALICE, 60))
    clock.advance(61)  # and so does expiry
    assert len(schedd.transactions) == 0 and run(schedd.begin_transaction(ALICE, 60))


# -- the submission API ----------------------------------------------------------------------------------------
def service_for(backend, clock, root: Path, access: AccessPolicy | None = None) -> SubmissionService:
    call = maybeDeferred  # (the backend's thread, made synchronous)
    return SubmissionService(backend, call, access or policy(), clock, SubmissionSettings(SCHEDD_NAME, root))


@pytest.fixture
def service(backend, clock, tmp_path) -> SubmissionService:
    return service_for(backend, clock, tmp_path / "staging")


def api_outcome(operation: Coroutine) -> tuple[ApiStatus, str]:
    try:
        run(operation)
    except ApiError as error:
        return error.code, error.text
    return ApiStatus.OK, "OK"


def ad_of(*pairs: tuple[str, str], **strings: str) -> list[Attr]:
    attrs = [Attr("Cmd", AttrType.STRING, "/bin/true"), Attr("Requirements", AttrType.EXPRESSION, "FALSE"),
             Attr("Iwd", AttrType.STRING, "/tmp")]
    return attrs + [Attr(name, AttrType.STRING, value) for name, value in strings.items()] + [
        Attr(name, AttrType.EXPRESSION, value) for name, value in pairs]


def api_submit(service: SubmissionService, caller: Caller, **strings: str) -> str:
    return run(service.submit(caller, ad_of(**strings))).rsplit("#", 1)[1]


@pytest.mark.parametrize("caller, owner, trusted, allowed", [
    (ALICE, "alice", False, True), (ALICE, "bob", False, False), (ROOT, "alice", False, True),
    (CONDOR, "root", False, False), (ANONYMOUS, GUEST, False, True), (ANONYMOUS, "alice", False, False),
    (ANONYMOUS, "alice", True, True), (ANONYMOUS, "root", True, False),
])
def test_api_submit_checks_the_owner(backend, clock, tmp_path, caller, owner, trusted, allowed):
    service = service_for(backend, clock, tmp_path / "staging", policy(trusted))
    code, text = api_outcome(service.submit(caller, ad_of(Owner=owner)))
    if allowed:
        assert code is ApiStatus.OK and backend.query(None)[0]["Owner"] == owner
    else:
        assert code is ApiStatus.FAIL and text.startswith("Owner refused: ") and repr(owner) in text
        assert backend.query(None) == []


def test_api_submit_without_owner_gets_the_callers_and_replaces_what_the_schedd_assigns(service, backend):
    job = api_submit(service, ALICE, User="root@evil", GlobalJobId="evil#9.9#1")
    ad = backend.get_job(*map(int, job.split(".")))
    assert ad["Owner"] == "alice" and ad["User"].startswith("alice@") and ad["GlobalJobId"].startswith(SCHEDD_NAME)
    forged = run(service.submit(ALICE, ad_of(("ClusterId", "4242"), ("ProcId", "3"), ("QDate", "1"))))
    assert forged.endswith("#2.0") and backend.get_job(2, 0)["QDate"] != 1


@pytest.mark.parametrize("action", list(JobAction))
def test_api_job_control_needs_the_owner(service, backend, action):
    job = api_submit(service, ALICE)
    key = tuple(map(int, job.split(".")))
    before = backend.get_job(*key)
    code, text = api_outcome(service.act(BOB, job, action, "not yours"))
    assert code is ApiStatus.FAIL and text.startswith(f"Not job owner of {job}: user 'bob' may not act on jobs "
                                                      f"owned by 'alice'")
    assert backend.get_job(*key) == before
    code, text = api_outcome(service.act(ALICE, job, action, "mine"))
    assert "Not job owner" not in text  # hold and remove apply; release, suspend and continue meet the job's state
    assert code is (ApiStatus.OK if action in (JobAction.HOLD, JobAction.REMOVE) else ApiStatus.FAIL), text
    assert api_outcome(service.act(BOB, "999.0", action, "x"))[0] is ApiStatus.NO_MATCH


def test_api_job_control_of_a_super_user_and_an_anonymous_client(backend, clock, tmp_path):
    strict = service_for(backend, clock, tmp_path / "strict")
    job = api_submit(strict, ALICE)
    assert api_outcome(strict.act(ANONYMOUS, job, JobAction.HOLD, "x"))[1].startswith("Not job owner")
    assert api_outcome(strict.act(CONDOR, job, JobAction.HOLD, "admin")) == (ApiStatus.OK, "OK")
    trusted = service_for(backend, clock, tmp_path / "trusted", policy(trusted=True))
    assert api_outcome(trusted.act(ANONYMOUS, job, JobAction.RELEASE, "x")) == (ApiStatus.OK, "OK")


@pytest.mark.parametrize("name", ["Owner", "owner", "User", "ClusterId", "ProcId", "GlobalJobId", "QDate",
                                  "EnteredCurrentStatus", "JobStatus", "NumJobStarts", "ClaimId"])
def test_set_attribute_refuses_what_the_schedd_owns(service, backend, name):
    """The issue's reproduction: setAttribute Owner=root answered OK and changed the Owner."""
    job = api_submit(service, ALICE)
    before = backend.get_job(*map(int, job.split(".")))
    for caller in (ALICE, ROOT):  # nobody, not even a super user
        code, text = api_outcome(service.set_attribute(caller, job, name, AttrType.STRING, "root"))
        assert (code, text) == (ApiStatus.FAIL, f"{name} is set by the schedd and cannot be changed")
    assert backend.get_job(*map(int, job.split("."))) == before


def test_set_attribute_needs_the_owner(service, backend):
    job = api_submit(service, ALICE)
    code, text = api_outcome(service.set_attribute(BOB, job, "Note", AttrType.STRING, "bob was here"))
    assert code is ApiStatus.FAIL and text.startswith(f"Not job owner of {job}")
    assert "Note" not in backend.get_job(*map(int, job.split(".")))
    assert api_outcome(service.set_attribute(ALICE, job, "Note", AttrType.STRING, "mine")) == (ApiStatus.OK, "OK")
    assert api_outcome(service.set_attribute(CONDOR, job, "Note", AttrType.STRING, "admin")) == (ApiStatus.OK, "OK")
    assert backend.get_job(*map(int, job.split(".")))["Note"] == "admin"
    assert api_outcome(service.set_attribute(BOB, "999.0", "Note", AttrType.STRING, "x"))[0] is ApiStatus.NO_MATCH


@pytest.fixture
def secret(tmp_path) -> Path:
    path = tmp_path / "secret"
    path.write_text("TOPSECRET\n")
    return path


def staged_job(service: SubmissionService, caller: Caller, *extra: Attr) -> str:
    """A job whose input "out.txt" was staged, so it lies in the job's spool; its Out names it."""
    staging = run(service.create(caller))
    run(service.send(caller, staging, "out.txt", 0, b"spooled output\n"))
    ads = [Attr("Cmd", AttrType.STRING, "/bin/true"), Attr("Requirements", AttrType.EXPRESSION, "FALSE"),
           Attr("Out", AttrType.STRING, "out.txt"), *extra]
    return run(service.submit(caller, ads, staging)).rsplit("#", 1)[1]


def test_fetch_reads_the_owners_spool_files(service):
    job = staged_job(service, ALICE)
    for name in ("OUT", "Out", "out.txt"):
        assert run(service.fetch(ALICE, job, name, 0, 100)) == b"spooled output\n"
    code, text = api_outcome(service.fetch(BOB, job, "OUT", 0, 100))
    assert code is ApiStatus.FAIL and text.startswith(f"Not job owner of {job}")
    assert run(service.fetch(CONDOR, job, "out.txt", 0, 100)) == b"spooled output\n"


@pytest.mark.parametrize("out", ["{secret}", "../../../../../../..{secret}", "sub/out.txt", "{spool}/../x"])
def test_fetch_refuses_an_output_outside_the_spool(service, backend, secret, out):
    """The issue's reproduction: a submit with Out=/secret and Requirements=FALSE, then fetch OUT, returned it."""
    spool = backend.spool_directory(1, 0)
    value = out.format(secret=secret, spool=spool)
    job = api_submit(service, ALICE, Out=value)
    assert job == "1.0"
    for name in ("OUT", "Out", value):  # read with alice's rights (she has no account here), never the gateway's
        code, text = api_outcome(service.fetch(ALICE, job, name, 0, 100))
        assert code is ApiStatus.FAIL and "TOPSECRET" not in text, text


def test_fetch_refuses_an_err_set_afterwards_to_a_file_outside_the_spool(service, secret):
    """The issue's reproduction: setAttribute Err=/etc/passwd on any job, then fetch ERR, returned it."""
    job = staged_job(service, ALICE)
    assert api_outcome(service.set_attribute(BOB, job, "Err", AttrType.STRING, str(secret)))[1].startswith(
        "Not job owner")
    run(service.set_attribute(ALICE, job, "Err", AttrType.STRING, str(secret)))
    for caller in (ALICE, ROOT):
        code, text = api_outcome(service.fetch(caller, job, "ERR", 0, 100))
        assert code is ApiStatus.FAIL and "TOPSECRET" not in text, text
    run(service.set_attribute(ALICE, job, "Err", AttrType.STRING, "out.txt"))  # a spool name is fine
    assert run(service.fetch(ALICE, job, "ERR", 0, 100)) == b"spooled output\n"


@pytest.mark.parametrize("name", ["/etc/passwd", "../../etc/passwd", "sub/x", "..", ""])
def test_fetch_takes_only_plain_spool_names(service, name):
    job = staged_job(service, ALICE)
    code, text = api_outcome(service.fetch(ALICE, job, name, 0, 100))
    assert code is ApiStatus.FAIL and "not a plain file name" in text


def test_read_only_queries_are_not_filtered(service):
    job = staged_job(service, ALICE)
    assert {a.name: a.value for a in run(service.job_ad(BOB, job))}["Owner"] == "alice"
    assert [s["Owner"] for s in run(service.summaries(ANONYMOUS, [job]))] == ["alice"]
    assert [s.owner for s in run(service.submissions(BOB))] == ["alice"]


# -- end to end, through a real gateway --------------------------------------------------------------------------
#: an anonymous caller gets "tester"; a loopback caller the gateway identifies gets its own name (root here)
E2E_CONFIG = QUEUE_ONLY + '[birdbath]\ndefault_owner = "tester"\n'


def json_call(gateway, operation: str, **params) -> dict:
    request = urllib.request.Request(gateway.url + f"submission/json/{operation}", json.dumps(params).encode(),
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def test_the_issues_reproductions_end_to_end(start_gateway, secret):
    import zeep

    gateway = start_gateway(E2E_CONFIG)
    schedd = zeep.Client(gateway.url + "condorSchedd.wsdl").service
    txn = schedd.beginTransaction(60).transaction
    cluster = schedd.newCluster(txn).integer
    proc = schedd.newJob(txn, cluster).integer
    forged = [{"name": "Cmd", "type": "STRING-ATTR", "value": "/bin/true"},
              {"name": "User", "type": "STRING-ATTR", "value": "root@evil"},
              {"name": "ClusterId", "type": "INTEGER-ATTR", "value": str(cluster + 5)}]
    assert schedd.submit(txn, cluster, proc, {"item": forged}).status.code == "SUCCESS"
    assert schedd.commitTransaction(txn).code == "SUCCESS"
    ad = {a.name: a.value for a in schedd.getJobAd(None, cluster, proc).classAd.item}
    assert ad["User"].startswith(ad["Owner"] + "@") and "evil" not in ad["User"]

    # a job of nobody's (root may submit for anyone): its Out is read with nobody's rights, never the gateway's
    owner = {"Owner": "nobody"} if os.geteuid() == 0 else {}
    submitted = json_call(gateway, "submit", ad={"Cmd": "/bin/true", "Iwd": "/tmp", "Out": str(secret),
                                                 "Requirements": {"TYPE": 0, "VALUE": "FALSE"}, **owner})
    job = submitted["id"]
    answer = json_call(gateway, "setAttribute", id=job, name="Owner", type="STRING", value="root")
    assert answer["status"] == {"code": "FAIL", "text": "Owner is set by the schedd and cannot be changed"}
    for file in ("OUT", str(secret)):
        fetched = json_call(gateway, "fetch", id=job, file=file, start=0, end=100)
        assert fetched["status"]["code"] == "FAIL", fetched
        assert "TOPSECRET" not in base64.b64decode(fetched.get("data") or "").decode(errors="replace")

"""Jobs run as their owner when the gateway is root, and the gateway never touches a path a job's ad names with
its own rights: the job's files, streams, transfers and user log are opened as the owner, so a job can reach only
what its owner could reach by logging in (``nobody`` here).

The in-process tests run the real launcher (``tests/local_runs.py``); one runs a whole gateway.  They need root;
elsewhere they skip, and the last ones test the personal-scheduler mode every non-root gateway has.  Their state
lives under a world-traversable directory in /tmp: pytest's tmp_path is root's alone."""

from __future__ import annotations

import os
import pwd
import stat
import uuid
from pathlib import Path

import pytest

from backends.interface import BackendError
from backends.local.backend import LocalBackend
from backends.local.owners import Accounts, NoAccount
from backends.local.sandbox import ExecuteDir
from jobmodel.classads import evaluate
from jobmodel.jobs import HoldCode
from tests.accounts import account_tool
from tests.local_runs import SCHEDD, attributes, make_world
from tests.test_hostile_input import read_only

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="jobs run as their owners only when the gateway is root")
NOBODY = pwd.getpwnam("nobody")
DENIED = "daemon"  # an owner with an account, on the deny list


@pytest.fixture
def world(traversable):
    world = make_world(traversable, Accounts([DENIED]))
    yield world
    world.queue.store.close()


@pytest.fixture
def home(world) -> Path:
    """A directory of nobody's, the jobs' Iwd."""
    home = world.iwd / "nobody"
    home.mkdir()
    os.chown(home, NOBODY.pw_uid, NOBODY.pw_gid)
    return home


@pytest.fixture
def forbidden() -> Path:
    """A path in root's home (0700), which nobody cannot reach: nothing may ever appear there."""
    path = Path("/root") / f"birdbath-test-{uuid.uuid4().hex}"
    yield path
    path.unlink(missing_ok=True)


def owned_by_nobody(path: Path) -> bool:
    status = path.lstat()
    return (status.st_uid, status.st_gid) == (NOBODY.pw_uid, NOBODY.pw_gid)


def shell(command: str, **attributes) -> dict:
    return {"Owner": "nobody", "Cmd": "/bin/sh", "Arguments": f"-c '{command}'", "LeaveJobInQueue": True} | attributes


# -- running as the owner -----------------------------------------------------------------------------------
@needs_root
def test_a_job_runs_as_its_owner_and_its_files_are_the_owners(world, home):
    (key,) = world.submit(**shell("id -u; id -g; id -G; touch made", Iwd=str(home), Out="out.txt", Err="err.txt"))
    ad = world.run(key)
    assert attributes(ad, "JobStatus", "ExitCode", "User") == {"JobStatus": 4, "ExitCode": 0,
                                                               "User": f"nobody@{SCHEDD}"}
    assert (home / "out.txt").read_text() == f"{NOBODY.pw_uid}\n{NOBODY.pw_gid}\n{NOBODY.pw_gid}\n"
    assert all(owned_by_nobody(home / name) for name in ("out.txt", "err.txt", "made"))


@needs_root
def test_a_sandboxed_job_transfers_its_files_as_its_owner(world, home):
    private = home / "in.txt"
    private.write_text("only for nobody\n")
    private.chmod(0o600)
    os.chown(private, NOBODY.pw_uid, NOBODY.pw_gid)
    (key,) = world.submit(**shell("stat -c %U . > where; cat in.txt > copy.txt; echo printed", Iwd=str(home),
                                  ShouldTransferFiles="YES", TransferInput="in.txt", Out="out.txt"))
    ad = world.run(key)
    assert attributes(ad, "JobStatus", "ExitCode") == {"JobStatus": 4, "ExitCode": 0}
    assert (home / "where").read_text() == "nobody\n"  # the sandbox is the owner's
    assert (home / "copy.txt").read_text() == "only for nobody\n" and (home / "out.txt").read_text() == "printed\n"
    assert all(owned_by_nobody(home / name) for name in ("where", "copy.txt", "out.txt"))
    assert not ExecuteDir.of(world.execute, *key).root.exists()


@needs_root
def test_get_env_gives_the_owner_its_login_environment_never_the_gateways(world, home, monkeypatch):
    monkeypatch.setenv("GATEWAY_SECRET", "root's")
    (key,) = world.submit(**shell("env", Iwd=str(home), Out="env.txt", GetEnv=True))
    assert evaluate(world.run(key), "ExitCode") == 0
    environment = dict(line.split("=", 1) for line in (home / "env.txt").read_text().splitlines())
    assert "GATEWAY_SECRET" not in environment
    assert (environment["USER"], environment["HOME"]) == ("nobody", NOBODY.pw_dir)


@needs_root
def test_a_spooled_job_gets_its_spool_and_the_directories_above_stay_roots(world):
    (key,) = world.submit(**shell("cat input.txt > copy.txt", Out="out.txt"), spooled=True,
                          files={"input.txt": b"staged\n"})
    spool = world.queue.spool.directory(*key)
    assert spool.stat().st_uid == 0 and (spool / "input.txt").stat().st_uid == 0  # the gateway's until it starts
    assert attributes(world.run(key), "JobStatus", "ExitCode") == {"JobStatus": 4, "ExitCode": 0}
    assert owned_by_nobody(spool) and stat.S_IMODE(spool.stat().st_mode) == 0o700
    assert owned_by_nobody(spool / "input.txt")
    assert all(level.stat().st_uid == 0 and stat.S_IMODE(level.stat().st_mode) == 0o755
               for level in (spool.parent, spool.parent.parent))
    assert world.queue.spool.read_job_file(*key, "copy.txt", 0, 100) == (7, b"staged\n")
    assert owned_by_nobody(spool / "copy.txt")


@needs_root
def test_a_job_without_files_gets_its_spool_when_it_starts_given_to_its_owner(world):
    (key,) = world.submit(**shell("echo made here > made.txt", Out="out.txt"), spooled=True)
    spool = world.queue.spool.directory(*key)
    assert not spool.exists()  # nothing staged: the commit made no spool
    assert world.queue.spool.list(*key) == []
    assert attributes(world.run(key), "JobStatus", "ExitCode") == {"JobStatus": 4, "ExitCode": 0}
    assert owned_by_nobody(spool) and stat.S_IMODE(spool.stat().st_mode) == 0o700
    assert all(level.stat().st_uid == 0 and stat.S_IMODE(level.stat().st_mode) == 0o755
               for level in (spool.parent, spool.parent.parent))
    assert [info.name for info in world.queue.spool.list(*key)] == ["made.txt", "out.txt"]
    assert owned_by_nobody(spool / "made.txt")


@needs_root
def test_a_job_that_works_elsewhere_and_has_no_files_gets_no_spool(world, home):
    (key,) = world.submit(**shell("echo here > made.txt", Iwd=str(home)))
    assert attributes(world.run(key), "JobStatus", "ExitCode") == {"JobStatus": 4, "ExitCode": 0}
    assert (home / "made.txt").read_text() == "here\n"
    assert not world.queue.spool.directory(*key).exists() and world.queue.spool.list(*key) == []


@needs_root
@pytest.mark.parametrize("inside", [True, False])
def test_an_iwd_named_through_its_spool_is_judged_by_where_it_leads(world, inside):
    """An Iwd below the spool gets it made (the job then finds its Iwd missing and is held as for any missing Iwd);
    one that leaves it with ``..`` is elsewhere."""
    (key,) = world.submit(**shell("true"))
    spool = world.queue.spool.directory(*key)
    ad = world.job(key)
    ad["Iwd"] = str(spool / "below" if inside else spool / ".." / ".." / "elsewhere")
    world.queue.store.apply({key: ad})
    held = world.run(key)
    assert held["JobStatus"] == 5 and held["HoldReasonCode"] == HoldCode.IWD_ERROR
    assert spool.exists() == inside


@needs_root
def test_a_job_whose_spool_cannot_be_made_when_it_starts_is_held_saying_why(world):
    (key,) = world.submit(**shell("true"), spooled=True)
    with read_only(world.queue.spool.root):
        ad = world.run(key)
    assert ad["JobStatus"] == 5 and not world.queue.spool.directory(*key).exists()
    assert ad["HoldReason"] == (f"Failed to create the spool directory of job {key[0]}.{key[1]}, reason: "
                                "Read-only file system")


@needs_root
def test_a_spool_still_the_gateways_when_its_job_starts_is_handed_over(world):
    """As a crash between making a spool and handing it over would leave it: the start hands it over."""
    (key,) = world.submit(**shell("echo ok > done.txt"), spooled=True)
    spool = world.queue.spool.create(*key)
    assert attributes(world.run(key), "JobStatus", "ExitCode") == {"JobStatus": 4, "ExitCode": 0}
    assert owned_by_nobody(spool) and owned_by_nobody(spool / "done.txt")


@needs_root
def test_a_spool_given_already_is_not_handed_over_again(world):
    """What is in a spool its owner has had may be the job's doing (a hard link to another's file, where the system
    allows one): a start hands over only a spool that is still the gateway's."""
    (key,) = world.submit(**shell("true"), spooled=True)
    spool = world.queue.spool.create(*key)
    world.queue.spool.give(*key, NOBODY.pw_uid, NOBODY.pw_gid)
    (spool / "roots.txt").write_text("root's\n")  # (root's, standing for another's file linked in)
    assert attributes(world.run(key), "JobStatus", "ExitCode") == {"JobStatus": 4, "ExitCode": 0}
    assert (spool / "roots.txt").stat().st_uid == 0


@needs_root
def test_a_root_job_runs_as_root_unless_root_is_denied(world, traversable):
    (key,) = world.submit(**shell("id -u", Owner="root", Iwd=str(world.iwd), Out="out.txt"))
    assert evaluate(world.run(key), "ExitCode") == 0
    assert (world.iwd / "out.txt").read_text() == "0\n"
    (traversable / "strict").mkdir()
    strict = make_world(traversable / "strict", Accounts(["root"]))
    try:
        (held,) = strict.submit(**shell("id -u", Owner="root", Iwd=str(strict.iwd)))
        assert attributes(strict.run(held), "JobStatus", "HoldReason", "HoldReasonCode") == {
            "JobStatus": 5, "HoldReason": "Jobs of 'root' may not run on this gateway (denied_owners)",
            "HoldReasonCode": int(HoldCode.FAILED_TO_CREATE_PROCESS)}
    finally:
        strict.queue.store.close()


@needs_root
def test_a_state_directory_other_users_cannot_traverse_is_said_in_the_log(tmp_path, traversable):
    from twisted.logger import globalLogPublisher

    from backends.local import LocalBackend

    def warnings_for(state_dir: Path) -> list[dict]:
        seen: list[dict] = []
        globalLogPublisher.addObserver(seen.append)
        try:
            LocalBackend(state_dir).close()
        finally:
            globalLogPublisher.removeObserver(seen.append)
        return [event for event in seen if "cannot reach the state directory" in event.get("log_format", "")]

    assert warnings_for(tmp_path / "state")  # pytest's tmp_path is root's alone: no job of nobody's could start
    assert not warnings_for(traversable / "state")
    assert all(stat.S_IMODE((traversable / "state" / name).stat().st_mode) == 0o755 for name in ("execute", "spool"))


# -- owners that cannot run jobs -----------------------------------------------------------------------------
@needs_root
@pytest.mark.parametrize("owner, reason", [
    ("no-such-user-birdbath", "The job's owner 'no-such-user-birdbath' has no local account on this machine"),
    (DENIED, f"Jobs of '{DENIED}' may not run on this gateway (denied_owners)"),
])
def test_an_owner_without_an_account_or_denied_has_the_job_held(world, owner, reason):
    (key,) = world.submit(**shell("true", Owner=owner))  # the submission itself is accepted
    assert attributes(world.run(key), "JobStatus", "HoldReason", "HoldReasonCode", "NumJobStarts") == {
        "JobStatus": 5, "HoldReason": reason, "HoldReasonCode": int(HoldCode.FAILED_TO_CREATE_PROCESS),
        "NumJobStarts": 0}
    assert not ExecuteDir.of(world.execute, *key).root.exists()


# -- nothing with the gateway's rights ---------------------------------------------------------------------
@needs_root
@pytest.mark.parametrize("attributes_, reason, code", [
    ({"Out": "{forbidden}"}, "Error from starter: cannot open standard output '{forbidden}': Permission denied",
     HoldCode.UNABLE_TO_OPEN_OUTPUT),
    ({"Err": "{forbidden}"}, "Error from starter: cannot open standard error '{forbidden}': Permission denied",
     HoldCode.UNABLE_TO_OPEN_OUTPUT),
    ({"In": "/etc/shadow"}, "Error from starter: cannot open standard input '/etc/shadow'",
     HoldCode.UNABLE_TO_OPEN_INPUT),
    ({"ShouldTransferFiles": "YES", "TransferInput": "/etc/shadow"},
     "Transfer input files failure: cannot read '/etc/shadow'", HoldCode.TRANSFER_INPUT_ERROR),
    ({"ShouldTransferFiles": "YES", "Out": "{forbidden}"},
     "Transfer output files failure: cannot write '{forbidden}': Permission denied", HoldCode.TRANSFER_OUTPUT_ERROR),
    ({"Iwd": "/root"}, "Iwd '/root' cannot be reached: Permission denied", HoldCode.IWD_ERROR),
    ({"Cmd": "{forbidden}"}, "Error from starter: Failed to execute '{forbidden}': Permission denied",
     HoldCode.FAILED_TO_CREATE_PROCESS),
])
def test_a_job_cannot_make_the_gateway_read_or_write_where_its_owner_cannot(world, home, forbidden, attributes_,
                                                                             reason, code):
    job = shell("echo escaped", Iwd=str(home)) | {name: value.format(forbidden=forbidden)
                                                  for name, value in attributes_.items()}
    (key,) = world.submit(**job)
    assert attributes(world.run(key), "JobStatus", "HoldReason", "HoldReasonCode") == {
        "JobStatus": 5, "HoldReason": reason.format(forbidden=forbidden), "HoldReasonCode": int(code)}
    assert not os.path.lexists(forbidden)


@needs_root
def test_the_user_log_is_written_as_its_owner(world, home, forbidden):
    fifo = home / "fifo.log"
    os.mkfifo(fifo)
    os.chown(fifo, NOBODY.pw_uid, NOBODY.pw_gid)
    for log in ("job.log", str(forbidden), str(fifo)):  # (a FIFO without a reader would block an open for writing)
        (key,) = world.submit(**shell("true", Iwd=str(home), UserLog=log))
        assert attributes(world.run(key), "JobStatus", "ExitCode") == {"JobStatus": 4, "ExitCode": 0}
    text = (home / "job.log").read_text()
    assert owned_by_nobody(home / "job.log")
    assert [line.split()[0] for line in text.splitlines() if line[:3].isdigit()] == ["000", "001", "005"]
    assert not os.path.lexists(forbidden)


# -- a whole gateway ---------------------------------------------------------------------------------------------
@needs_root
def test_a_gateway_run_by_root_runs_a_job_for_nobody_as_nobody(start_gateway, traversable):
    """Root on loopback (a queue super user) submits for nobody: the job runs as nobody in its spool, which it
    owns; a link it leaves there to a secret is neither listed nor read."""
    from tests.conftest import zeep_client
    from tests.test_execution import fetch, status_is, submit, wait_for

    config = '[backends.local]\nslots = 1\nuid_domain = "example.org"\n'
    gateway = start_gateway(config, state_dir=traversable / "state")
    schedd = zeep_client(gateway.url + "condorSchedd.wsdl", gateway.url)
    (key,) = submit(schedd, files={"in.txt": b"hello\n"}, Owner="nobody", Cmd="/bin/sh",
                    Arguments="-c 'id -u; stat -c %U in.txt; ln -s /etc/shadow leak'", Out="out.txt")
    done = wait_for(schedd, key, status_is(4))
    assert done["ExitCode"] == "0" and done["User"] == "nobody@example.org"
    assert fetch(schedd, key, "out.txt") == f"{NOBODY.pw_uid}\nnobody\n".encode()
    assert "leak" not in {item.name for item in schedd.listSpool(None, *key).info.item}
    assert schedd.getFile(None, *key, "leak", 0, 100).status.code == "FAIL"


# -- a gateway that is not root: everything as its user ----------------------------------------------------------
def test_a_personal_scheduler_runs_every_job_as_its_own_user(traversable):
    """A gateway that is not root (here: told not to switch) runs nobody's job as itself, and keeps its files."""
    world = make_world(traversable, Accounts([DENIED], switching=False))
    try:
        (key,) = world.submit(**shell("id -u > uid.txt; stat -c %u . >> uid.txt"), spooled=True,
                              files={"input.txt": b"x"})
        spool = world.queue.spool.directory(*key)
        assert spool.stat().st_uid == os.geteuid() and (spool / "input.txt").stat().st_uid == os.geteuid()
        assert attributes(world.run(key), "JobStatus", "ExitCode") == {"JobStatus": 4, "ExitCode": 0}
        uid = os.geteuid()
        assert world.queue.spool.read_job_file(*key, "uid.txt", 0, 100)[1] == f"{uid}\n{uid}\n".encode()
        (sandboxed,) = world.submit(**shell("stat -c %u . > where", Iwd=str(world.iwd), ShouldTransferFiles="YES"))
        assert attributes(world.run(sandboxed), "ExitCode") == {"ExitCode": 0}
        assert (world.iwd / "where").read_text() == f"{os.geteuid()}\n"  # its sandbox was the gateway user's
    finally:
        world.queue.store.close()


def test_accounts_switch_only_when_the_gateway_is_root():
    personal = Accounts([DENIED], switching=False)
    assert personal.of("nobody") is None and personal.of("no-such-user-birdbath") is None
    with pytest.raises(NoAccount, match="denied_owners"):
        personal.of(DENIED)  # a denied owner is refused in both modes
    if ROOT:
        account = Accounts().of("nobody")
        assert Accounts().switching and (account.uid, account.gid) == (NOBODY.pw_uid, NOBODY.pw_gid)
    else:
        assert not Accounts().switching and Accounts().of("nobody") is None
        with pytest.raises(ValueError):
            Accounts(switching=True)


@pytest.mark.skipif(not ROOT, reason="accounts are switched to only by a root gateway")
def test_another_name_for_uid_0_never_runs_a_job_as_root(monkeypatch):
    """A second passwd entry with uid 0 (toor and the like) is not a way around root's rules."""
    real = pwd.getpwnam
    toor = pwd.struct_passwd(("toor", "x", 0, 0, "root by another name", "/root", "/bin/sh"))
    monkeypatch.setattr(pwd, "getpwnam", lambda name: toor if name == "toor" else real(name))
    with pytest.raises(NoAccount, match="another name for root"):
        Accounts().of("toor")
    with pytest.raises(NoAccount, match="denied_owners"):
        Accounts(["root"]).of("root")
    assert Accounts().of("root").uid == 0  # root's own jobs, unless denied


@needs_root
def test_an_account_is_looked_up_again_once_the_account_files_change(accounts):
    """Every job's start asks for its owner's account: it is kept (PASSWD_CACHE_REFRESH), but never past a change
    to the account files, whatever made it.  (Other tests' accounts change the same files meanwhile: that only makes
    it look up again.)"""
    kept = Accounts()
    user = accounts.user()
    kept.of(user.name)
    group = accounts.group()
    account_tool("usermod", "--append", "--groups", group.gr_name, user.name)
    assert group.gr_gid in kept.of(user.name).groups  # /etc/group changed: read again
    account_tool("userdel", user.name)
    with pytest.raises(NoAccount, match="has no local account"):
        kept.of(user.name)
    account_tool("useradd", "--no-create-home", "--user-group", "--shell", "/usr/sbin/nologin",
                 user.name)  # (removed again with the test's accounts)
    assert kept.of(user.name).uid == pwd.getpwnam(user.name).pw_uid  # an owner without an account is not kept


@needs_root
def test_a_kept_account_is_used_until_passwd_cache_refresh_or_a_change_of_its_files(tmp_path):
    """(What an account a directory service changed relies on: the local files do not tell.)  The files watched here
    are the test's own, which nothing else changes."""
    files = [tmp_path / "passwd", tmp_path / "group"]
    for path in files:
        path.write_text("")
    now = [1000.0]
    kept = Accounts(cache_refresh=60, clock=lambda: now[0], account_files=[str(path) for path in files])
    first = kept.of("nobody")
    now[0] += 59
    assert kept.of("nobody") is first
    now[0] += 1
    again = kept.of("nobody")
    assert again is not first and again == first
    assert kept.of("nobody") is again
    files[1].write_text("changed\n")
    assert kept.of("nobody") is not again
    never = Accounts(cache_refresh=0)
    assert never.of("nobody") is not never.of("nobody")


@pytest.mark.parametrize("refresh", [-1, "often", True])
def test_a_bad_passwd_cache_refresh_stops_the_start(tmp_path, refresh):
    with pytest.raises(ValueError, match="passwd_cache_refresh must be a number of seconds >= 0"):
        LocalBackend(tmp_path / "state", passwd_cache_refresh=refresh)


@needs_root
def test_a_jobs_own_files_are_read_with_its_owners_rights(world, home):
    """fetch/GetJobData outside the spool: nobody's job reads what nobody can, and nothing more (a root-only file,
    a link in the file's place)."""
    (key,) = world.submit(**shell("echo hello > out.txt", Iwd=str(home), Out="out.txt"))
    assert evaluate(world.run(key), "ExitCode") == 0
    ad = world.queue.get_job(*key)
    assert world.queue.read_owner_file(ad, str(home / "out.txt"), 0, 100) == (6, b"hello\n")
    assert world.queue.read_owner_file(ad, str(home / "out.txt"), 2, 2) == (6, b"ll")
    secret = world.iwd / "secret.txt"
    secret.write_text("root's\n")
    secret.chmod(0o600)
    (home / "link.txt").symlink_to(home / "out.txt")
    for path, reason in ((secret, "Permission denied"), (home / "link.txt", "symbolic link"),
                         (home / "none.txt", "No such file")):
        with pytest.raises(BackendError, match=reason):
            world.queue.read_owner_file(ad, str(path), 0, 100)

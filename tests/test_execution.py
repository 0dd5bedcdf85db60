"""The local backend runs jobs: submitted through SOAP, watched with getJobAd, output fetched with getFile."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from jobmodel.arguments import join_v2
from tests.birdbath import ad, begin, expr, values
from tests.conftest import module_gateway, zeep_client
from tests.test_logging import wait_for_line

RUNNER = "[backends.local]\nslots = 2\nkill_grace = 1.0\nperiodic_interval = 0.5\n"
KEEP = {"LeaveJobInQueue": expr("FilesRetrieved =?= false"), "FilesRetrieved": False}


runner = module_gateway(RUNNER)


@pytest.fixture(scope="module")
def schedd(runner):
    return zeep_client(runner.url + "condorSchedd.wsdl", runner.url)


@pytest.fixture(autouse=True)
def empty_queue_afterwards(request):
    """Remove what a test left queued or running, so it cannot hold a slot another test needs."""
    yield
    if "schedd" in request.fixturenames:
        clear_queue(request.getfixturevalue("schedd"))


def clear_queue(schedd) -> None:
    array = schedd.getJobAds(None, "JobStatus != 3 && JobStatus != 4").classAdArray
    for item in (array.item if array is not None else []):
        found = values(item)
        schedd.removeJob(None, int(found["ClusterId"]), int(found["ProcId"]), "test cleanup", False)


def submit(schedd, files: dict[str, bytes] | None = None, procs: int = 1, **attributes) -> list[tuple[int, int]]:
    txn = begin(schedd)
    cluster = schedd.newCluster(txn).integer
    keys = []
    for _ in range(procs):
        proc = schedd.newJob(txn, cluster).integer
        for name, data in (files or {}).items():
            assert schedd.declareFile(txn, cluster, proc, name, len(data), "NOHASH", None).code == "SUCCESS"
            assert schedd.sendFile(txn, cluster, proc, name, 0, data).code == "SUCCESS"
        job = {"Requirements": expr("TRUE"), **KEEP, **attributes}
        answer = schedd.submit(txn, cluster, proc, ad(**job))
        assert answer.status.code == "SUCCESS", answer
        keys.append((cluster, proc))
    assert schedd.commitTransaction(txn).code == "SUCCESS"
    return keys


def job(schedd, key) -> dict[str, str]:
    answer = schedd.getJobAd(None, *key)
    return values(answer.classAd) if answer.status.code == "SUCCESS" else {}


def wait_for(schedd, key, condition, timeout: float = 30.0) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    while True:
        current = job(schedd, key)
        if condition(current):
            return current
        if time.monotonic() > deadline:
            raise AssertionError(f"job {key} never reached the expected state; last seen {current}")
        time.sleep(0.05)


def wait_until(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{condition} stayed false for {timeout}s")
        time.sleep(0.05)


def process_group(pid: int) -> int:
    """The process group of a live process."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[2])


def group_states(pgid: int) -> list[str]:
    """The states (R, S, T, ...) of the processes of a process group that have not exited (zombies left out)."""
    states = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            state, _, group = (proc / "stat").read_text().rsplit(")", 1)[1].split()[:3]
        except (OSError, ValueError):  # it exited meanwhile
            continue
        if int(group) == pgid and state not in ("Z", "X"):
            states.append(state)
    return states


def status_is(*statuses: int):
    return lambda current: current.get("JobStatus") in {str(s) for s in statuses}


def fetch(schedd, key, name: str) -> bytes:
    size = {f.name: f.size for f in schedd.listSpool(None, *key).info.item}[name]
    chunks = []
    for offset in range(0, size, 1000):
        answer = schedd.getFile(None, *key, name, offset, min(1000, size - offset))
        assert answer.status.code == "SUCCESS"
        chunks.append(answer.data)
    return b"".join(chunks)


def script(body: str) -> bytes:
    return ("#!/bin/sh\n" + body + "\n").encode()


# -- the Birdbath workflow ----------------------------------------------------------------------------------
def test_input_files_in_output_back_through_the_spool(schedd):
    run = script('tr a-z A-Z < words.txt > shouted.txt\necho "args: $1 $2"\necho warning >&2\nexit 0')
    (key,) = submit(schedd, files={"run.sh": run, "words.txt": b"hello spool\n"}, Cmd="run.sh",
                    Arguments="one 'two three'", ShouldTransferFiles="YES", Out="out.txt", Err="err.txt")
    done = wait_for(schedd, key, status_is(4))
    assert done["ExitCode"] == "0" and done["ExitBySignal"] == "FALSE"
    assert fetch(schedd, key, "shouted.txt") == b"HELLO SPOOL\n"
    assert fetch(schedd, key, "out.txt") == b"args: one two three\n"
    assert fetch(schedd, key, "err.txt") == b"warning\n"
    assert {f.name for f in schedd.listSpool(None, *key).info.item} >= {"run.sh", "words.txt", "shouted.txt"}
    assert schedd.closeSpool(None, *key).code == "SUCCESS"
    wait_for(schedd, key, lambda current: current == {})  # FilesRetrieved: the job leaves the queue


def test_the_lifecycle_attributes_a_schedd_keeps(schedd):
    (key,) = submit(schedd, Cmd="/bin/sh", Arguments="-c 'sleep 0.3; exit 7'")
    done = wait_for(schedd, key, status_is(4))
    for name in ("JobStartDate", "JobCurrentStartDate", "CompletionDate", "EnteredCurrentStatus"):
        assert int(done[name]) >= int(done["QDate"])
    assert done["NumJobStarts"] == "1" and done["NumJobCompletions"] == "1"
    assert done["ExitCode"] == "7" and done["LastJobStatus"] == "2"
    assert float(done["RemoteWallClockTime"]) >= 0.3
    assert float(done["RemoteUserCpu"]) >= 0 and float(done["RemoteSysCpu"]) >= 0
    assert int(done["ImageSize"]) > 0 and int(done["MemoryUsage"]) > 0


def test_a_job_killed_by_a_signal(schedd):
    (key,) = submit(schedd, Cmd="/bin/sh", Arguments="-c 'kill -9 $$'")
    done = wait_for(schedd, key, status_is(4))
    assert done["ExitBySignal"] == "TRUE" and done["ExitSignal"] == "9" and "ExitCode" not in done


def test_arguments_and_environment_in_both_syntaxes(schedd, tmp_path):
    out = tmp_path / "env.txt"
    (v2,) = submit(schedd, Cmd="/bin/sh", Arguments=f"-c 'echo \"$GREETING|$OTHER|$0\" > {out}' zero",
                   Environment="GREETING='hello there' OTHER=x", Iwd=str(tmp_path))
    wait_for(schedd, v2, status_is(4))
    assert out.read_text() == "hello there|x|zero\n"
    (v1,) = submit(schedd, Cmd="/usr/bin/env", Args="", Env="ONE=1;TWO=2", Out=str(tmp_path / "v1.txt"),
                   Iwd=str(tmp_path))
    wait_for(schedd, v1, status_is(4))
    environment = dict(line.split("=", 1) for line in (tmp_path / "v1.txt").read_text().splitlines())
    assert environment["ONE"] == "1" and environment["TWO"] == "2" and "_CONDOR_SCRATCH_DIR" in environment


#: what condor_starter puts in the environment of a job that did not ask for its submitter's (getenv = false)
STARTER_VARIABLES = {"HOME", "BATCH_SYSTEM", "_CONDOR_SCRATCH_DIR", "_CONDOR_JOB_AD", "_CONDOR_MACHINE_AD",
                     "_CONDOR_JOB_IWD"}


def test_without_getenv_a_job_sees_only_its_environment_and_the_starters(schedd, tmp_path):
    (key,) = submit(schedd, Cmd="/usr/bin/env", Environment="ONE=1", Out=str(tmp_path / "env"), Iwd=str(tmp_path))
    wait_for(schedd, key, status_is(4))
    environment = dict(line.split("=", 1) for line in (tmp_path / "env").read_text().splitlines())
    assert set(environment) == STARTER_VARIABLES | {"ONE"}  # no PATH, nothing of the gateway's (its PYTHONPATH)
    assert environment["BATCH_SYSTEM"] == "HTCondor" and environment["_CONDOR_JOB_IWD"] == str(tmp_path)
    (key,) = submit(schedd, Cmd="/usr/bin/env", GetEnv=True, Out=str(tmp_path / "all"), Iwd=str(tmp_path))
    wait_for(schedd, key, status_is(4))
    assert "PYTHONPATH=" in (tmp_path / "all").read_text()  # getenv = true: the environment it runs in


def test_match_time_references_are_filled_from_the_slot(schedd, tmp_path):
    import platform

    (key,) = submit(schedd, Cmd="/bin/sh", Arguments="-c 'echo $0 $1' $$(OpSys).$$(Arch) $$(NoSuch:fallback)",
                    Environment="CPUS=$$([TARGET.Cpus * 2])", Out=str(tmp_path / "out"), Iwd=str(tmp_path))
    wait_for(schedd, key, status_is(4))
    arch = {"x86_64": "X86_64", "aarch64": "aarch64"}.get(platform.machine(), platform.machine())
    assert (tmp_path / "out").read_text() == f"LINUX.{arch} fallback\n"
    assert "$$(OpSys)" in job(schedd, key)["Arguments"]  # the queued ad keeps the references, as the schedd's


def test_a_match_time_reference_the_slot_cannot_fill_holds_the_job(schedd):
    (key,) = submit(schedd, Cmd="/bin/echo", Arguments="$$(NoSuchAttribute)")
    held = wait_for(schedd, key, status_is(5))
    assert held["HoldReason"] == ("Cannot expand $$(NoSuchAttribute) in Arguments: the machine ad has no "
                                  "attribute NoSuchAttribute")


def test_standard_input_and_a_relative_command_in_a_shared_iwd(schedd, tmp_path):
    (tmp_path / "prog").write_bytes(script("cat; echo done"))
    (tmp_path / "prog").chmod(0o755)
    (tmp_path / "input").write_text("from stdin\n")
    (key,) = submit(schedd, Cmd="prog", In="input", Out="output", Iwd=str(tmp_path), ShouldTransferFiles="NO")
    wait_for(schedd, key, status_is(4))
    assert (tmp_path / "output").read_text() == "from stdin\ndone\n"


# -- control of running jobs --------------------------------------------------------------------------------
def test_hold_stops_a_running_job_and_release_runs_it_again(schedd, tmp_path):
    marker = tmp_path / "starts"
    (key,) = submit(schedd, Cmd="/bin/sh", Arguments=f"-c 'echo start >> {marker}; sleep 30'")
    wait_for(schedd, key, status_is(2))
    wait_until(marker.exists)
    started = time.monotonic()
    assert schedd.holdJob(None, *key, "pause please", False, False, False).code == "SUCCESS"
    held = wait_for(schedd, key, status_is(5))
    assert held["HoldReason"] == "pause please" and held["HoldReasonCode"] == "1"
    wait_for(schedd, key, lambda current: float(current.get("RemoteWallClockTime", 0)) > 0)
    assert time.monotonic() - started < 10
    assert schedd.releaseJob(None, *key, "go on", False, False).code == "SUCCESS"
    again = wait_for(schedd, key, lambda current: current.get("NumJobStarts") == "2" and
                     current.get("JobStatus") == "2")
    assert again["LastHoldReason"] == "pause please"
    wait_until(lambda: marker.read_text().count("start") == 2)
    assert marker.read_text() == "start\nstart\n"
    assert schedd.removeJob(None, *key, "enough", False).code == "SUCCESS"
    removed = wait_for(schedd, key, status_is(3))
    assert removed["RemoveReason"] == "enough"


def test_removing_a_completed_job_kept_in_the_queue_succeeds_and_keeps_it_completed(runner, schedd):
    """HTCondor's abortJob marked even a completed job removed (SUCCESS); the gateway answers SUCCESS, logs it and
    keeps the job's completion; closeSpool still lets it leave."""
    (key,) = submit(schedd, Cmd="/bin/true")
    wait_for(schedd, key, lambda current: current.get("JobStatus") == "4")
    answer = schedd.removeJob(None, *key, "clean up", False)
    assert (answer.code, answer.message) == ("SUCCESS", "Success")
    wait_for_line(runner.log, "removeJob from", f"job {key[0]}.{key[1]} is completed already", "SUCCESS")
    assert job(schedd, key)["JobStatus"] == "4" and "RemoveReason" not in job(schedd, key)
    assert schedd.closeSpool(None, *key).code == "SUCCESS"
    wait_until(lambda: not job(schedd, key))


def test_remove_honours_remove_kill_sig(schedd, tmp_path):
    caught, ready = tmp_path / "caught", tmp_path / "ready"
    body = f"trap 'echo usr1 > {caught}; exit 0' USR1\ntouch {ready}\nwhile true; do sleep 0.1; done"
    (key,) = submit(schedd, files={"trap.sh": script(body)}, Cmd="trap.sh", ShouldTransferFiles="YES",
                    RemoveKillSig="SIGUSR1")
    wait_for(schedd, key, status_is(2))
    wait_until(ready.exists)  # the shell has installed its trap
    assert schedd.removeJob(None, *key, "stop", False).code == "SUCCESS"
    wait_for(schedd, key, status_is(3))
    wait_until(caught.exists)
    assert caught.read_text() == "usr1\n"


def test_a_job_ignoring_its_signal_is_killed_after_the_grace_period(schedd, tmp_path):
    alive, pid = tmp_path / "alive", tmp_path / "pid"
    loop = f"trap '' TERM; echo $$ > {pid}; while true; do touch {alive}; sleep 0.1; done"
    (key,) = submit(schedd, Cmd="/bin/sh", Arguments="-c " + join_v2([loop]))
    wait_for(schedd, key, status_is(2))
    wait_until(alive.exists)  # the trap is in place
    group = process_group(int(pid.read_text()))
    assert group_states(group)
    started = time.monotonic()
    schedd.holdJob(None, *key, "stubborn", False, False, False)
    wait_for(schedd, key, lambda current: current.get("JobStatus") == "5" and
             float(current.get("RemoteWallClockTime", 0)) > 0, timeout=15)
    assert time.monotonic() - started >= 0.9  # SIGTERM was ignored; SIGKILL came after kill_grace (1 s)
    wait_until(lambda: group_states(group) == [], timeout=5)  # nothing of the job runs any more


def test_on_exit_remove_false_requeues_the_job(schedd):
    (key,) = submit(schedd, Cmd="/bin/true", OnExitRemove=expr("NumJobStarts >= 3"))
    done = wait_for(schedd, key, status_is(4))
    assert done["NumJobStarts"] == "3" and done["NumJobCompletions"] == "1"


def test_on_exit_hold(schedd):
    (key,) = submit(schedd, Cmd="/bin/sh", Arguments="-c 'exit 2'", OnExitHold=expr("ExitCode =!= 0"))
    held = wait_for(schedd, key, status_is(5))
    assert held["HoldReasonCode"] == "3" and "OnExitHold" in held["HoldReason"] and held["ExitCode"] == "2"


def test_periodic_hold_and_release(schedd):
    (key,) = submit(schedd, Cmd="/bin/sleep", Arguments="30", PeriodicHold=expr("JobStatus == 2"),
                    PeriodicRelease=expr("NumJobStarts < 2"))
    wait_for(schedd, key, lambda current: current.get("NumJobStarts") == "2", timeout=20)
    held = wait_for(schedd, key, status_is(5), timeout=20)
    assert "PeriodicHold" in held["HoldReason"] and held["HoldReasonCode"] == "3"
    schedd.removeJob(None, *key, "done", False)


def test_periodic_remove(schedd):
    (key,) = submit(schedd, Cmd="/bin/sleep", Arguments="30", PeriodicRemove=expr("JobStatus == 2"))
    removed = wait_for(schedd, key, status_is(3), timeout=20)
    assert "PeriodicRemove" in removed["RemoveReason"]


# -- scheduling -----------------------------------------------------------------------------------------------
def test_many_short_jobs_share_the_slots(schedd, tmp_path):
    record = tmp_path / "spans"
    # each job stays until another one runs beside it (or every job has started), so both slots are seen in use
    # whatever the machine's speed; at most 10 s, so a scheduler that used one slot fails on the count, not a hang
    running = f"$(( $(grep -c start {record}) - $(grep -c end {record}) ))"
    wait = (f"n=0; while [ $(grep -c start {record}) -lt 12 ] && [ {running} -lt 2 ] && [ $n -lt 200 ]; "
            f"do sleep 0.05; n=$((n+1)); done")
    body = "-c " + join_v2([f"echo start $(date +%s.%N) >> {record}; {wait}; echo end $(date +%s.%N) >> {record}"])
    keys = submit(schedd, procs=12, Cmd="/bin/sh", Arguments=body)
    for key in keys:
        wait_for(schedd, key, status_is(4), timeout=60)
    events = sorted((float(stamp), 1 if kind == "start" else -1)
                    for kind, stamp in (line.split() for line in record.read_text().splitlines()))
    running, peak = 0, 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    assert len(events) == 24 and peak == 2


def test_jobs_start_in_priority_order(start_gateway, tmp_path):
    gateway = start_gateway("[backends.local]\nslots = 1\n")
    schedd = zeep_client(gateway.url + "condorSchedd.wsdl", gateway.url)
    order = tmp_path / "order"
    txn = begin(schedd)
    cluster = schedd.newCluster(txn).integer
    keys = []
    for priority in (1, 10, 5):
        proc = schedd.newJob(txn, cluster).integer
        schedd.submit(txn, cluster, proc, ad(Cmd="/bin/sh", Arguments=f"-c 'echo {priority} >> {order}'",
                                             JobPrio=priority, Requirements=expr("TRUE"), **KEEP))
        keys.append((cluster, proc))
    schedd.commitTransaction(txn)
    for key in keys:
        wait_for(schedd, key, status_is(4))
    assert order.read_text().split() == ["10", "5", "1"]


def test_unmatched_requirements_and_oversized_requests_stay_idle(schedd):
    (never,) = submit(schedd, Cmd="/bin/true", Requirements=expr('TARGET.Arch == "NO-SUCH-ARCH"'))
    (huge,) = submit(schedd, Cmd="/bin/true", RequestCpus=64)
    (fits,) = submit(schedd, Cmd="/bin/true", Requirements=expr("TARGET.Memory > 0 && TARGET.Cpus >= 1"))
    # `fits` was committed after the other two, so the scheduling pass that started it saw them idle and passed
    # them over; nothing about them or the machine changes afterwards, so they can never start
    wait_for(schedd, fits, status_is(4))
    assert job(schedd, never)["JobStatus"] == "1" and job(schedd, huge)["JobStatus"] == "1"
    schedd.requestReschedule()  # and asking for another pass changes nothing: a job queued after it still runs
    (after,) = submit(schedd, Cmd="/bin/true")
    wait_for(schedd, after, status_is(4))
    assert job(schedd, never)["JobStatus"] == "1" and job(schedd, huge)["JobStatus"] == "1"
    for key in (never, huge):
        schedd.removeJob(None, *key, "cleanup", False)


def test_scheduler_and_local_universe_jobs_run_without_slots(start_gateway, tmp_path):
    gateway = start_gateway("[backends.local]\nslots = 0\n")
    schedd = zeep_client(gateway.url + "condorSchedd.wsdl", gateway.url)
    keys = [submit(schedd, Cmd="/bin/sh", Arguments=f"-c 'echo {u} > {tmp_path}/u{u}'", JobUniverse=u,
                   Iwd=str(tmp_path))[0] for u in (7, 12)]
    (vanilla,) = submit(schedd, Cmd="/bin/true")
    for key in keys:
        wait_for(schedd, key, status_is(4))
    assert (tmp_path / "u7").read_text() == "7\n" and (tmp_path / "u12").read_text() == "12\n"
    assert job(schedd, vanilla)["JobStatus"] == "1"


# -- jobs that cannot run -------------------------------------------------------------------------------------
@pytest.mark.parametrize("attributes, code, words", [
    ({"Cmd": "/no/such/program"}, "6", "No such file"),
    ({"Cmd": "/bin/true", "ShouldTransferFiles": "YES", "TransferInput": "missing.dat"}, "13", "missing.dat"),
    ({"Cmd": "/bin/cat", "In": "/no/such/input"}, "8", "standard input"),
    ({"Cmd": "/bin/true", "Out": "/no/such/directory/out"}, "7", "cannot open standard output"),
    ({"Cmd": "/bin/true", "ShouldTransferFiles": "YES", "TransferOutput": "never.dat"}, "12", "never.dat"),
    ({"Cmd": "/bin/true", "JobUniverse": 9}, "6", "JobUniverse 9"),
])
def test_bad_jobs_go_on_hold_with_a_clear_reason(schedd, attributes, code, words):
    (key,) = submit(schedd, **attributes)
    held = wait_for(schedd, key, status_is(5))
    assert held["HoldReasonCode"] == code and words in held["HoldReason"]


def test_files_that_are_not_programs_go_on_hold(schedd, tmp_path):
    (tmp_path / "data.txt").write_text("not a program\n")
    (tmp_path / "data.txt").chmod(0o644)
    (tmp_path / "garbage").write_bytes(b"\x00\x01\x02 not an executable format")
    (tmp_path / "garbage").chmod(0o755)
    (plain,) = submit(schedd, Cmd="data.txt", Iwd=str(tmp_path), ShouldTransferFiles="NO")
    (binary,) = submit(schedd, Cmd="garbage", Iwd=str(tmp_path), ShouldTransferFiles="NO")
    held = wait_for(schedd, plain, status_is(5))
    assert held["HoldReasonCode"] == "6" and "not executable" in held["HoldReason"]
    held = wait_for(schedd, binary, status_is(5))
    assert held["HoldReasonCode"] == "6" and "Exec format error" in held["HoldReason"]


# -- user log ---------------------------------------------------------------------------------------------
def test_the_user_log_reads_with_htcondors_reader(schedd, tmp_path):
    import htcondor2

    T = htcondor2.JobEventType
    logfile = tmp_path / "jobs.log"

    def events_of(key) -> list:
        return [e.type for e in htcondor2.JobEventLog(str(logfile)).events(stop_after=0) if (e.cluster, e.proc) == key]

    (done,) = submit(schedd, Cmd="/bin/sh", Arguments="-c 'exit 4'", UserLog=str(logfile))
    wait_for(schedd, done, status_is(4))
    (held,) = submit(schedd, Cmd="/bin/sleep", Arguments="30", UserLog=str(logfile))
    wait_for(schedd, held, status_is(2))
    schedd.holdJob(None, *held, "for the log", False, False, False)
    wait_for(schedd, held, status_is(5))
    schedd.releaseJob(None, *held, "released for the log", False, False)
    # a released job runs again as soon as a slot is free: wait for that run, so the removal comes after it
    wait_for(schedd, held, lambda current: current.get("NumJobStarts") == "2" and current.get("JobStatus") == "2")
    schedd.removeJob(None, *held, "removed for the log", False)
    wait_for(schedd, held, status_is(3))
    wait_until(lambda: T.JOB_ABORTED in events_of(held))
    assert events_of(done) == [T.SUBMIT, T.EXECUTE, T.JOB_TERMINATED]
    assert events_of(held) == [T.SUBMIT, T.EXECUTE, T.JOB_HELD, T.JOB_RELEASED, T.EXECUTE, T.JOB_ABORTED]
    everything = list(htcondor2.JobEventLog(str(logfile)).events(stop_after=0))
    (terminated,) = [e for e in everything if e.type == T.JOB_TERMINATED]
    assert terminated["ReturnValue"] == 4 and terminated["TerminatedNormally"] is True
    (held_event,) = [e for e in everything if e.type == T.JOB_HELD]
    assert held_event["HoldReason"] == "for the log" and held_event["HoldReasonCode"] == 1
    (released,) = [e for e in everything if e.type == T.JOB_RELEASED]
    assert released["Reason"] == "released for the log"
    (aborted,) = [e for e in everything if e.type == T.JOB_ABORTED]
    assert aborted["Reason"] == "removed for the log"


def test_jobs_get_the_stack_limit_the_gateway_was_started_with(schedd, runner):
    """The gateway raises its own stack limit for deep ClassAd evaluations (gateway.stack); a job never sees that."""
    import resource

    from jobmodel.expressions import ExpressionLimits

    limits = open(f"/proc/{runner.process.pid}/limits").read()
    assert f"Max stack size            {ExpressionLimits().stack_bytes()}" in limits
    (key,) = submit(schedd, files={"run.sh": script("ulimit -S -s")}, Cmd="run.sh", ShouldTransferFiles="YES",
                    Out="out.txt")
    wait_for(schedd, key, status_is(4))
    soft, _ = resource.getrlimit(resource.RLIMIT_STACK)
    expected = b"unlimited\n" if soft == resource.RLIM_INFINITY else b"%d\n" % (soft // 1024)
    assert fetch(schedd, key, "out.txt") == expected

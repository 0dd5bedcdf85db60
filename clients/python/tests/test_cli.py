"""The ``birdbath`` command, run as a user would."""

from __future__ import annotations

import getpass
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from conftest import RUNNER

from birdbath_client import Collector, Expr, GatewayError, JobId, Schedd, Selection


def birdbath(gateway, *args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(command(gateway, *args), capture_output=True, text=True, timeout=120, cwd=cwd)


def command(gateway, *args: str) -> list[str]:
    return [sys.executable, "-m", "birdbath_client.cli", "--url", gateway.url, *args]


def test_submit_a_submit_file_list_it_and_wait(gateway, tmp_path):
    (tmp_path / "job.sub").write_text("executable = /bin/sh\narguments = \"-c 'echo hi from $(Process); exit 0'\"\n"
                                      "output = out.$(Process)\nleave_in_queue = true\nqueue 2\n")
    submitted = birdbath(gateway, "submit", str(tmp_path / "job.sub"))
    assert submitted.returncode == 0, submitted.stderr
    cluster = int(submitted.stdout.split("cluster ")[1].rstrip(".\n"))
    assert "2 job(s) submitted" in submitted.stdout
    waited = birdbath(gateway, "wait", f"{cluster}.1", "--timeout", "60")
    assert waited.returncode == 0, waited.stderr
    assert f"job {cluster}.1: Completed, exit code 0" in waited.stdout and "Completed" in waited.stderr
    assert birdbath(gateway, "wait", "99999.0").returncode == 1  # not in the queue: a clear error
    deadline = time.monotonic() + 30
    while not (tmp_path / "out.1").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (tmp_path / "out.0").read_text() == "hi from 0\n" and (tmp_path / "out.1").read_text() == "hi from 1\n"


def test_submit_with_spooling_and_fetch_the_output(gateway, tmp_path):
    (tmp_path / "count.sh").write_text("#!/bin/sh\nwc -w < words.txt > count.txt\n")
    (tmp_path / "count.sh").chmod(0o755)
    (tmp_path / "words.txt").write_text("one two three four\n")
    (tmp_path / "job.sub").write_text("executable = count.sh\ntransfer_input_files = words.txt\n"
                                      "should_transfer_files = YES\nqueue\n")
    submitted = birdbath(gateway, "submit", "--spool", str(tmp_path / "job.sub"))
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.split("cluster ")[1].rstrip(".\n") + ".0"
    assert birdbath(gateway, "wait", job).returncode == 0
    fetched = birdbath(gateway, "fetch", job, str(tmp_path / "out"), "--close")
    assert fetched.returncode == 0, fetched.stderr
    assert (tmp_path / "out" / "count.txt").read_text().strip() == "4"
    assert "downloading [" in fetched.stderr and fetched.stderr.endswith("bytes\n")  # the progress line is ended
    assert "uploading [" in submitted.stderr and submitted.stderr.endswith("bytes\n")


def submitted_clusters(result: subprocess.CompletedProcess) -> list[int]:
    """The cluster ids condor_submit's lines name ("N job(s) submitted to cluster C.")."""
    return [int(line.rsplit(" ", 1)[1].rstrip(".")) for line in result.stdout.splitlines() if "submitted" in line]


def test_each_submission_names_its_files_after_its_own_cluster(gateway, tmp_path):
    (tmp_path / "job.sub").write_text("executable = /bin/echo\narguments = $(Cluster).$(Process)\n"
                                      "output = out.$(Cluster).$(Process)\nqueue\n")
    clusters = [submitted_clusters(birdbath(gateway, "submit", str(tmp_path / "job.sub")))[0] for _ in range(2)]
    assert clusters[0] != clusters[1]
    for cluster in clusters:
        assert birdbath(gateway, "wait", f"{cluster}.0").returncode == 0
        assert (tmp_path / f"out.{cluster}.0").read_text() == f"{cluster}.0\n"


def test_two_queue_statements_and_a_new_executable_make_what_condor_submit_makes(gateway, tmp_path):
    (tmp_path / "job.sub").write_text("executable = /bin/echo\narguments = first\noutput = first.$(Process)\n"
                                      "queue 2\narguments = second\noutput = second.$(Process)\nqueue\n"
                                      "executable = /bin/true\nqueue\n")
    result = birdbath(gateway, "submit", str(tmp_path / "job.sub"))
    assert result.returncode == 0, result.stderr
    assert [line.split(" job(s)")[0] for line in result.stdout.splitlines()] == ["3", "1"]
    first, other = submitted_clusters(result)
    assert birdbath(gateway, "wait", f"{first}.2").returncode == 0
    assert (tmp_path / "second.2").read_text() == "second\n"
    assert birdbath(gateway, "wait", f"{other}.0").returncode == 0


def test_spooled_output_into_a_subdirectory_is_fetched_into_it(gateway, tmp_path):
    (tmp_path / "job.sub").write_text("executable = /bin/echo\narguments = spooled $(Process)\n"
                                      "output = out/job.$(Process).out\nerror = err/job.$(Process).err\n"
                                      "should_transfer_files = YES\nqueue 2\n")
    result = birdbath(gateway, "submit", "-spool", str(tmp_path / "job.sub"))
    assert result.returncode == 0, result.stderr
    (cluster,) = submitted_clusters(result)
    assert birdbath(gateway, "wait", f"{cluster}.1").returncode == 0
    fetched = birdbath(gateway, "fetch", f"{cluster}.1", str(tmp_path / "back"), "-close")
    assert fetched.returncode == 0, fetched.stderr
    assert (tmp_path / "back" / "out" / "job.1.out").read_text() == "spooled 1\n"
    assert (tmp_path / "back" / "err" / "job.1.err").read_text() == ""


def test_submit_refuses_a_missing_executable_and_submits_nothing(gateway, tmp_path):
    (tmp_path / "job.sub").write_text("executable = /bin/true\nqueue\nexecutable = ./absent.sh\nqueue\n")
    result = birdbath(gateway, "submit", str(tmp_path / "job.sub"))
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == (f"birdbath: ERROR: Can't open \"{tmp_path}/absent.sh\"  with flags 00 "
                             "(No such file or directory)\n")
    assert birdbath(gateway, "q", "-af", "Cmd", "-constraint", f'Iwd == "{tmp_path}"').stdout == ""


def test_q_shows_a_condor_q_table_and_constraints_work(gateway, tmp_path):
    (tmp_path / "idle.sub").write_text("executable = /bin/sleep\narguments = 100\nrequirements = false\n"
                                       "+Tag = \"cli-q\"\nqueue\n")
    submitted = birdbath(gateway, "submit", str(tmp_path / "idle.sub"))
    job = submitted.stdout.split("cluster ")[1].rstrip(".\n") + ".0"
    table = birdbath(gateway, "q", "-nobatch", "-constraint", 'Tag == "cli-q"')
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["ID", "OWNER", "SUBMITTED", "RUN_TIME", "ST", "PRI", "SIZE", "CMD"]
    assert lines[1].split()[0] == job and " I " in lines[1] and lines[1].rstrip().endswith("sleep 100")
    assert "1 jobs; 0 completed, 0 removed, 1 idle" in table.stdout
    af = birdbath(gateway, "q", "-constraint", 'Tag == "cli-q"', "-af", "ClusterId", "Tag")
    assert af.stdout.split() == [job.split(".")[0], "cli-q"]
    for command, expected in (("hold", "held"), ("release", "released"), ("rm", "marked for removal")):
        result = birdbath(gateway, command, job, "-reason", "testing")
        assert result.returncode == 0 and f"Job {job} {expected}." in result.stdout
    again = birdbath(gateway, "release", job)
    assert (again.returncode, again.stderr) == (1, f"birdbath: Job {job} not found.\n")  # it left the queue


def test_submit_dag_and_wait_exits_with_the_dag_status(gateway, tmp_path):
    (tmp_path / "bad.sub").write_text("executable = /bin/false\nqueue\n")
    (tmp_path / "bad.dag").write_text("JOB A bad.sub\n")
    result = birdbath(gateway, "submit_dag", str(tmp_path / "bad.dag"), "--wait")
    assert result.returncode == 1 and "exit code 1" in result.stdout
    assert (tmp_path / "bad.dag.rescue001").exists()


def test_a_gateway_that_is_down(tmp_path):
    result = subprocess.run([sys.executable, "-m", "birdbath_client.cli", "--url", "http://127.0.0.1:1/", "q"],
                            capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stderr) == (
        1, "birdbath: cannot connect to the gateway at http://127.0.0.1:1/: connection refused\n")


# -- HTCondor users' habits ------------------------------------------------------------------------------
IDLE = Expr("FALSE")  # Requirements nothing matches: the job stays idle until removed


def poll(check, what: str, timeout: float = 60):
    """check()'s first true value, polled until a deadline (never a fixed sleep)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    pytest.fail(f"timed out after {timeout} s waiting for {what}")


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def af(result: subprocess.CompletedProcess) -> list[list[str]]:
    assert result.returncode == 0, result.stderr
    return [line.split() for line in result.stdout.splitlines()]


def test_wait_exits_with_the_exit_code_of_a_shared_file_system_job(gateway, tmp_path):
    (tmp_path / "three.sub").write_text("executable = /bin/sh\narguments = \"-c 'exit 3'\"\nqueue\n")
    submitted = birdbath(gateway, "submit", str(tmp_path / "three.sub"))
    job = submitted.stdout.split("cluster ")[1].rstrip(".\n") + ".0"
    waited = birdbath(gateway, "wait", job, "-timeout", "60")
    assert waited.returncode == 3, waited.stderr
    assert f"job {job}: Completed, exit code 3" in waited.stdout
    assert waited.stderr.endswith("s\n") and "Completed" in waited.stderr  # the progress line, ended


def test_wait_for_a_job_that_already_left_the_queue(gateway, schedd):
    (job,) = schedd.submit({"Cmd": "/bin/sh", "Arguments": "-c 'exit 3'", "Requirements": Expr("TRUE")})
    poll(lambda: schedd.job(job) is None, f"job {job} to leave the queue")
    with pytest.raises(GatewayError) as error:  # what Birdbath itself answers now, as the original did
        schedd.call("getJobAd", None, job.cluster, job.proc)
    assert error.value.code == "UNKNOWNJOB"
    waited = birdbath(gateway, "wait", str(job))
    assert waited.returncode == 3 and f"job {job}: Completed, exit code 3" in waited.stdout, waited.stderr
    assert schedd.wait(job, timeout=10)["ExitCode"] == 3
    unknown = birdbath(gateway, "wait", "999999.0")
    assert unknown.returncode == 1 and "job 999999.0 is unknown" in unknown.stderr


def test_wait_for_a_removed_job_fails_with_a_message(gateway, schedd):
    (job,) = schedd.submit({"Cmd": "/bin/true", "Requirements": IDLE})
    removed = birdbath(gateway, "rm", str(job), "-reason", "no longer needed")
    assert removed.returncode == 0 and f"Job {job} marked for removal." in removed.stdout
    waited = birdbath(gateway, "wait", str(job))  # it has left the queue for the history by now
    assert waited.returncode == 1
    assert f"job {job} was removed (no longer needed)" in waited.stderr and f"job {job}: Removed" in waited.stdout


def test_wait_gives_up_after_the_timeout_with_either_spelling(gateway, schedd):
    (job,) = schedd.submit({"Cmd": "/bin/true", "Requirements": IDLE})
    for flag in ("-timeout", "--timeout"):
        waited = birdbath(gateway, "wait", str(job), flag, "0.5")
        assert waited.returncode == 1 and "did not finish within 0.5 s (it is Idle)" in waited.stderr
        assert "\nbirdbath: " in waited.stderr  # the progress line was ended before the error
    schedd.remove(job)


def test_fetch_of_an_unknown_job_fails_without_creating_the_directory(gateway, schedd, tmp_path):
    fetched = birdbath(gateway, "fetch", "999999.0", str(tmp_path / "out"))
    assert fetched.returncode == 1
    assert fetched.stderr == "birdbath: job 999999.0 is unknown (neither in the queue nor in the history)\n"
    assert not (tmp_path / "out").exists()
    (job,) = schedd.submit({"Cmd": "/bin/true", "Requirements": Expr("TRUE")})
    poll(lambda: schedd.job(job) is None, f"job {job} to leave the queue")
    gone = birdbath(gateway, "fetch", str(job), str(tmp_path / "out"))
    assert gone.returncode == 1 and f"job {job} has left the queue (completed)" in gone.stderr
    assert not (tmp_path / "out").exists()


def test_hold_release_and_rm_of_a_whole_cluster(gateway, schedd):
    jobs = schedd.submit({"Cmd": "/bin/true", "Requirements": IDLE, "LeaveJobInQueue": True}, count=3)
    cluster = jobs[0].cluster
    states = lambda: [ad["JobStatus"] for ad in schedd.query(f"ClusterId == {cluster}")]  # noqa: E731
    held = birdbath(gateway, "hold", str(cluster), "-reason", "cluster hold")
    assert held.returncode == 0 and held.stdout == f"All jobs in cluster {cluster} have been held.\n"
    assert states() == [5, 5, 5]
    table = birdbath(gateway, "q", "-hold", str(cluster)).stdout.splitlines()
    assert table[0].split() == ["ID", "OWNER", "HELD_SINCE", "HOLD_REASON"]
    assert [line.split()[0] for line in table[1:4]] == [str(job) for job in jobs]
    assert all(line.endswith(" cluster hold") for line in table[1:4])
    released = birdbath(gateway, "release", str(cluster))
    assert released.returncode == 0 and released.stdout == f"All jobs in cluster {cluster} have been released.\n"
    assert states() == [1, 1, 1]
    schedd.hold(jobs[1], "only this one")
    removed = birdbath(gateway, "rm", str(cluster))
    assert removed.stdout == f"All jobs in cluster {cluster} have been marked for removal.\n"
    assert states() == [3, 3, 3]
    again = birdbath(gateway, "rm", str(cluster))
    assert again.returncode == 1 and f"no job in cluster {cluster} to remove" in again.stderr
    for name in ("rm", "hold", "release"):
        assert birdbath(gateway, name, "999999").returncode == 1


def test_actions_on_a_constraint_with_condor_rms_default_reason(gateway, schedd):
    tag = unique("batch")
    jobs = schedd.submit({"Cmd": "/bin/true", "Requirements": IDLE, "Batch": tag}, count=2)
    constraint = f'Batch == "{tag}"'
    held = birdbath(gateway, "hold", "-constraint", constraint)
    assert (held.returncode, held.stdout) == (0, f"All jobs matching constraint ({constraint}) have been held.\n")
    user = getpass.getuser()
    assert {schedd.job(job)["HoldReason"] for job in jobs} == {f"via birdbath hold (by user {user})"}
    released = birdbath(gateway, "release", "--constraint", constraint)
    assert released.stdout == f"All jobs matching constraint ({constraint}) have been released.\n"
    assert birdbath(gateway, "rm", "-constraint", constraint, str(jobs[0])).returncode == 2  # one way to name jobs
    removed = birdbath(gateway, "rm", "-constraint", constraint)
    assert removed.returncode == 0
    assert schedd.job(jobs[0], history=True)["RemoveReason"] == f"via birdbath rm (by user {user})"


def test_acting_on_a_job_in_the_wrong_state_says_so_plainly(gateway, schedd):
    (job,) = schedd.submit({"Cmd": "/bin/true", "Requirements": IDLE, "LeaveJobInQueue": True})
    assert birdbath(gateway, "hold", str(job)).stdout == f"Job {job} held.\n"
    again = birdbath(gateway, "hold", str(job))
    assert (again.returncode, again.stderr) == (1, f"birdbath: Job {job} is already held.\n")
    birdbath(gateway, "release", str(job))
    not_held = birdbath(gateway, "release", str(job))
    assert (not_held.returncode, not_held.stderr) == (1, f"birdbath: Job {job} is not held.\n")
    birdbath(gateway, "rm", str(job))
    removed = birdbath(gateway, "rm", str(job))
    assert (removed.returncode, removed.stderr) == (1, f"birdbath: Job {job} is already removed.\n")
    unknown = birdbath(gateway, "hold", "999999.0")
    assert (unknown.returncode, unknown.stderr) == (1, "birdbath: Job 999999.0 not found.\n")


def test_qedit_sets_attributes_of_a_cluster_or_a_constraint(gateway, schedd):
    jobs = schedd.submit({"Cmd": "/bin/true", "Requirements": IDLE}, count=2)
    cluster = str(jobs[0].cluster)
    edited = birdbath(gateway, "qedit", cluster, "Color", '"blue"', "Size", "7")
    assert edited.returncode == 0, edited.stderr
    assert edited.stdout == 'Set attribute "Color" for 2 matching jobs.\nSet attribute "Size" for 2 matching jobs.\n'
    assert af(birdbath(gateway, "q", cluster, "-af", "Color", "Size")) == [["blue", "7"], ["blue", "7"]]
    one = birdbath(gateway, "qedit", "-constraint", f"ClusterId == {cluster} && ProcId == 1", "Color", '"red"')
    assert one.stdout == 'Set attribute "Color" for 1 matching job.\n'
    assert birdbath(gateway, "qedit", cluster, "Color").returncode == 2  # a name without a value
    assert birdbath(gateway, "qedit", "999999", "Color", "1").returncode == 1
    schedd.remove_cluster(jobs[0].cluster)


def test_wait_for_a_cluster_waits_for_every_job(gateway, tmp_path):
    (tmp_path / "job.sub").write_text("executable = /bin/sh\narguments = \"-c 'exit $(Process)'\"\nqueue 2\n")
    (cluster,) = submitted_clusters(birdbath(gateway, "submit", str(tmp_path / "job.sub")))
    waited = birdbath(gateway, "wait", str(cluster), "-timeout", "60")
    assert waited.returncode == 1  # the first status that is not 0: proc 1's
    assert waited.stdout.splitlines() == [f"job {cluster}.0: Completed, exit code 0",
                                          f"job {cluster}.1: Completed, exit code 1",
                                          f"All jobs in cluster {cluster} done."]


def test_q_shows_a_line_per_batch_by_default(gateway, schedd):
    owner = unique("batcher")
    jobs = schedd.submit({"Cmd": "/bin/true", "Requirements": IDLE, "Owner": owner}, count=3)
    schedd.hold(jobs[2], "wait")
    (named,) = schedd.submit({"Cmd": "/bin/true", "Requirements": IDLE, "Owner": owner, "JobBatchName": "nightly"})
    lines = birdbath(gateway, "q", owner).stdout.splitlines()
    assert lines[0] == "" and lines[1].startswith(f"-- Schedd: {gateway.url} @ ")
    assert lines[2].split() == ["OWNER", "BATCH_NAME", "SUBMITTED", "DONE", "RUN", "IDLE", "HOLD", "TOTAL", "JOB_IDS"]
    first, second = (line.split() for line in lines[3:5])
    assert first[:3] == [owner, "ID:", str(jobs[0].cluster)] and first[5:] == ["_", "_", "2", "1", "3",
                                                                                f"{jobs[0].cluster}.0-2"]
    assert second[:2] == [owner, "nightly"] and second[4:] == ["_", "_", "1", "_", "1", str(named)]
    assert lines[5] == ""
    assert lines[6] == "Total for query: 4 jobs; 0 completed, 0 removed, 3 idle, 0 running, 1 held, 0 suspended"
    assert lines[7].startswith("Total for all users: ") and len(lines) == 8
    for job in (*jobs, named):
        schedd.remove(job)


def test_better_analyze_says_which_condition_no_slot_satisfies(gateway, schedd):
    (job,) = schedd.submit({"Cmd": "/bin/true", "RequestCpus": 64,
                            "Requirements": Expr('(TARGET.OpSys == "WINDOWS") && (TARGET.Memory >= 1)')})
    (held,) = schedd.submit({"Cmd": "/bin/true", "Requirements": IDLE})
    schedd.hold(held, "not yet")
    for flag in ("-better-analyze", "--analyze"):
        lines = birdbath(gateway, "q", str(job), flag).stdout.splitlines()
        assert lines[0] == f"The Requirements expression for job {job.cluster}.000 is"
        steps = {line[5:].split(None, 1)[1]: int(line[5:].split()[0]) for line in lines if line.startswith("[")}
        assert steps['TARGET.OpSys == "WINDOWS"'] == 0 and steps["TARGET.Memory >= 1"] >= 1
        assert steps["TARGET.Cpus >= RequestCpus (64)"] == 0
        assert "   No slot satisfies: TARGET.OpSys == \"WINDOWS\"" in lines
        assert f"{job.cluster}.000:  Run analysis summary ignoring user priority.  Of 1 machines," in lines
    explained = birdbath(gateway, "q", str(held), "-better-analyze").stdout.splitlines()
    assert explained[:3] == [f"{held.cluster}.000:  Job is held.", "", "Hold reason: not yet"]
    schedd.remove(job)
    schedd.remove(held)


def test_q_autoformat_options_and_format(gateway, schedd):
    (job,) = schedd.submit({"Cmd": "/bin/true", "Requirements": IDLE, "Note": "a b", "Size": 7})
    shown = birdbath(gateway, "q", str(job), "-af:jhr", "Note", "Size")
    assert shown.stdout == f'ID Note Size\n{job} "a b" 7\n'
    assert birdbath(gateway, "q", str(job), "-af:lt", "Note", "Size").stdout == "Note = a b\tSize = 7\n"
    assert birdbath(gateway, "q", str(job), "-af:n", "Size", "Note").stdout == "7\na b\n"
    formatted = birdbath(gateway, "q", str(job), "-format", "%d:", "Size", "-format", "%s|", "Note",
                         "-format", "%d\n", "Missing")
    assert formatted.stdout == "7:a b|undefined\n"
    escaped = birdbath(gateway, "q", str(job), "-format", r"%d\t", "Size", "-format", r"\x5b%s]\n", "Note")
    assert escaped.stdout == "7\t[a b]\n"  # as the shell passes "%d\n": C's escapes, as condor_q reads them
    assert birdbath(gateway, "q", str(job), "-format", r"%d\q\\n", "Size").stdout == "7\\q\\n"
    assert birdbath(gateway, "q", str(job), "-af:x", "Size").returncode == 2
    schedd.remove(job)


def test_q_shows_only_my_jobs_unless_allusers_or_named(gateway, schedd):
    tag, other = unique("mine"), unique("someone")
    (mine,) = schedd.submit({"Cmd": "/bin/true", "Requirements": IDLE, "Tag": tag})  # the gateway's user: mine
    (theirs,) = schedd.submit({"Cmd": "/bin/true", "Requirements": IDLE, "Tag": tag, "Owner": other})
    listed = lambda *args: af(birdbath(gateway, "q", "-constraint", f'Tag == "{tag}"', *args, "-af", "Owner"))  # noqa
    assert listed() == [[getpass.getuser()]]
    assert sorted(listed("-allusers")) == sorted([[getpass.getuser()], [other]])
    assert af(birdbath(gateway, "q", other, "-af", "ClusterId")) == [[str(theirs.cluster)]]  # named: shown
    schedd.remove(mine)
    schedd.remove(theirs)


def test_q_refuses_a_constraint_that_does_not_parse_and_counts_with_totals(gateway, schedd):
    bad = birdbath(gateway, "q", "-constraint", "ClusterId ==")
    assert (bad.returncode, bad.stderr) == (1, "birdbath: cannot parse the constraint 'ClusterId =='\n")
    jobs = schedd.submit({"Cmd": "/bin/true", "Requirements": IDLE}, count=2)
    totals = birdbath(gateway, "q", str(jobs[0].cluster), "-totals")
    assert totals.stdout == "2 jobs; 0 completed, 0 removed, 2 idle, 0 running, 0 held, 0 suspended\n"
    mistyped = birdbath(gateway, "q", "-hld")  # -h with letters that are no options: an error, not the help
    assert mistyped.returncode == 2 and mistyped.stdout == "" and "ignored explicit argument 'ld'" in mistyped.stderr
    schedd.remove_cluster(jobs[0].cluster)


def test_rm_of_an_owner_and_q_restricted_to_owners_clusters_and_jobs(gateway, schedd):
    owner, other = unique("alice"), unique("bob")
    first = schedd.submit({"Cmd": "/bin/true", "Requirements": IDLE, "Owner": owner}, count=2)
    (second,) = schedd.submit({"Cmd": "/bin/true", "Requirements": IDLE, "Owner": owner})
    (kept,) = schedd.submit({"Cmd": "/bin/true", "Requirements": IDLE, "Owner": other})
    ids = lambda *args: [row[0] for row in af(birdbath(gateway, "q", *args, "-af", "GlobalJobId"))]  # noqa: E731
    assert af(birdbath(gateway, "q", owner, "-af", "ClusterId", "ProcId", "Owner")) == [
        [str(job.cluster), str(job.proc), owner] for job in (*first, second)]
    assert af(birdbath(gateway, "q", str(first[0].cluster), "-af", "ProcId")) == [["0"], ["1"]]
    assert af(birdbath(gateway, "q", str(first[1]), str(kept.cluster), "-af", "Owner")) == [[owner], [other]]
    assert len(ids(other)) == 1 and ids(unique("nobody")) == []
    removed = birdbath(gateway, "rm", owner)
    assert removed.returncode == 0 and removed.stdout == f'All jobs of user "{owner}" have been marked for removal.\n'
    assert schedd.query(f'Owner == "{owner}"') == [] and schedd.job(kept)["JobStatus"] == 1
    assert birdbath(gateway, "rm", owner).returncode == 1  # nothing left to remove
    assert birdbath(gateway, "rm", "-all", owner).returncode == 2  # -all or arguments, not both
    assert birdbath(gateway, "rm").returncode == 2
    schedd.remove(kept)


def test_rm_all(gateway, schedd):
    jobs = schedd.submit({"Cmd": "/bin/true", "Requirements": IDLE}, count=2)
    removed = birdbath(gateway, "rm", "--all", "--reason", "clean up")
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout == "All jobs have been marked for removal.\n"
    assert all(schedd.job(job) is None for job in jobs)
    assert not [ad for ad in schedd.query() if ad["JobStatus"] not in (3, 4)]


def test_q_run_shows_only_running_jobs_with_their_host(gateway, schedd):
    tag = unique("run")
    (running,) = schedd.submit({"Cmd": "/bin/sleep", "Arguments": "60", "Requirements": Expr("TRUE"), "Tag": tag})
    (idle,) = schedd.submit({"Cmd": "/bin/sleep", "Arguments": "60", "Requirements": IDLE, "Tag": tag})
    poll(lambda: schedd.job(running)["JobStatus"] == 2, f"job {running} to run")
    for flag in ("-run", "--run"):
        table = birdbath(gateway, "q", flag, "-constraint", f'Tag == "{tag}"').stdout.splitlines()
        assert table[0].split() == ["ID", "OWNER", "SUBMITTED", "RUN_TIME", "HOST(S)"]
        assert [line.split()[0] for line in table[1:-2]] == [str(running)]
        assert table[1].split()[-1] == schedd.job(running)["RemoteHost"]
        assert table[-1].startswith("1 jobs; 0 completed, 0 removed, 0 idle, 1 running")
    nobatch = birdbath(gateway, "q", "-nobatch", "-constraint", f'Tag == "{tag}"').stdout.splitlines()
    assert [line.split()[0] for line in nobatch[1:-2]] == [str(running), str(idle)]
    assert birdbath(gateway, "rm", str(running.cluster), str(idle.cluster)).returncode == 0


def test_history_newest_first_with_limit_cluster_owner_and_constraint(start_gateway):
    # a gateway of its own, so that its user's history holds these jobs only: jobs run as their owner (a root
    # gateway holds jobs of made-up owners), so the owner is the one the gateway identifies on loopback, ours
    gateway = start_gateway(RUNNER)
    schedd = Schedd(gateway.url)
    owner = getpass.getuser()
    jobs = []
    for code in (0, 1, 2):  # one after the other, so they leave the queue in this order
        (job,) = schedd.submit({"Cmd": "/bin/sh", "Arguments": f"-c 'exit {code}'", "Requirements": Expr("TRUE"),
                                "Owner": owner})
        poll(lambda job=job: schedd.job(job) is None, f"job {job} to leave the queue")
        jobs.append(job)
    (queued,) = schedd.submit({"Cmd": "/bin/true", "Requirements": IDLE, "Owner": owner})  # not history
    assert af(birdbath(gateway, "history", owner, "-af", "ClusterId", "ExitCode")) == [
        [str(job.cluster), str(code)] for job, code in reversed(list(zip(jobs, (0, 1, 2))))]
    for flag in ("-limit", "--limit"):
        assert af(birdbath(gateway, "history", flag, "2", owner, "-af", "ClusterId")) == [
            [str(jobs[2].cluster)], [str(jobs[1].cluster)]]
    assert af(birdbath(gateway, "history", str(jobs[0].cluster), "-af", "Owner")) == [[owner]]
    long = birdbath(gateway, "history", "-constraint", f'Owner == "{owner}" && ExitCode == 1', "-long")
    assert long.returncode == 0 and f"ClusterId = {jobs[1].cluster}\n" in long.stdout
    assert long.stdout.count("ClusterId = ") == 1 and f'Owner = "{owner}"' in long.stdout
    table = birdbath(gateway, "history", "-limit", "1", owner).stdout.splitlines()
    assert table[0].split() == ["ID", "OWNER", "SUBMITTED", "RUN_TIME", "ST", "COMPLETED", "CMD"]
    assert len(table) == 2 and table[1].split()[:2] == [str(jobs[2]), owner] and " C " in table[1]
    assert str(queued) not in birdbath(gateway, "history", owner).stdout
    bad = birdbath(gateway, "history", "-constraint", "Owner ==")
    assert bad.returncode == 1 and "cannot parse the constraint" in bad.stderr
    schedd.remove(queued)


def test_a_reader_that_goes_away_ends_the_command_quietly(gateway, schedd):
    padding = "x" * 4000  # 40 jobs' ads are far more than a pipe holds, so head's leaving is noticed
    jobs = schedd.submit({"Cmd": "/bin/true", "Requirements": IDLE, "Padding": padding}, count=40)
    cli = subprocess.Popen(command(gateway, "q", "-long", str(jobs[0].cluster)), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
    head = subprocess.Popen(["head", "-1"], stdin=cli.stdout, stdout=subprocess.PIPE)
    cli.stdout.close()  # only head reads it now
    first, _ = head.communicate(timeout=120)
    errors = cli.stderr.read().decode()
    assert cli.wait(timeout=120) == 141 and errors == "", errors
    assert first.decode().count("\n") == 1
    closed = subprocess.Popen(command(gateway, "q", "-long"), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    closed.stdout.close()  # nobody reads at all: the first write fails
    assert closed.wait(timeout=120) == 141 and b"Traceback" not in closed.stderr.read()
    schedd.remove_cluster(jobs[0].cluster)


@pytest.mark.parametrize("name", ["submit", "q", "history", "rm", "hold", "release", "qedit", "wait", "fetch",
                                  "submit_dag", "status", None])
def test_every_option_has_both_spellings(name):
    from birdbath_client.cli import _parser

    parser = _parser()
    if name is not None:
        parser = parser._subparsers._group_actions[0].choices[name]
    for action in parser._actions:
        if "-h" in action.option_strings:  # argparse's own help, kept at the top level only
            continue
        strings = set(action.option_strings)
        for option in strings:
            assert option.lstrip("-") and {"-" + option.lstrip("-"), "--" + option.lstrip("-")} <= strings, option


def test_every_option_and_argument_has_help_text():
    import argparse

    from birdbath_client.cli import _parser

    parser = _parser()
    commands = parser._subparsers._group_actions[0].choices
    missing = [f"{name} {action.option_strings or action.dest}"
               for name, command in [*commands.items(), ("birdbath", parser)] for action in command._actions
               if not action.help and not isinstance(action, argparse._SubParsersAction)]
    assert not missing


def test_selections_become_constraints():
    from birdbath_client.jobs import Scope, all_of, any_of

    assert Selection.parse("27").scope is Scope.CLUSTER and Selection.parse("27.3").job == JobId(27, 3)
    assert Selection.parse('o"brien').constraint() == 'Owner == "o\\"brien"'
    with pytest.raises(ValueError):
        Selection.parse("27.x")
    assert any_of([]) is None and all_of(None, None) is None
    assert all_of(any_of([Selection.parse("1"), Selection.parse("al")]), "JobStatus == 5") == (
        '((ClusterId == 1) || (Owner == "al")) && (JobStatus == 5)')


def test_wait_for_a_cluster_counts_the_jobs_that_already_left_the_queue(gateway, schedd):
    """condor_wait's status for a script: proc 0 exited 1 and left the queue, proc 1 exited 0 and stays; the
    cluster failed."""
    failed = {"Cmd": "/bin/sh", "Arguments": "-c 'exit 1'", "Requirements": Expr("TRUE")}
    jobs = schedd.submit_many([failed, {**failed, "Arguments": "-c 'exit 0'", "LeaveJobInQueue": True}])
    poll(lambda: schedd.job(jobs[0]) is None and schedd.job(jobs[1])["JobStatus"] == 4, "proc 0 to leave the queue")
    waited = birdbath(gateway, "wait", str(jobs[0].cluster))
    assert waited.returncode == 1, waited.stderr
    assert waited.stdout.splitlines() == [f"job {jobs[0]}: Completed, exit code 1",
                                          f"job {jobs[1]}: Completed, exit code 0",
                                          f"All jobs in cluster {jobs[0].cluster} done."]


def test_q_lists_the_jobs_of_the_owner_the_gateway_names(gateway, schedd):
    """The gateway, not the login name the client sees (here one the gateway does not know), says whose jobs are
    "mine"."""
    assert schedd.http.who_am_i() == {"owner": getpass.getuser(), "user": getpass.getuser(),
                                      "authentication": "socket"}
    (job,) = schedd.submit({"Cmd": "/bin/true", "Requirements": IDLE})
    listed = subprocess.run(command(gateway, "q", "-af", "ClusterId"), capture_output=True, text=True, timeout=60,
                            env={**os.environ, "LOGNAME": unique("someone"), "USER": unique("someone")})
    assert [str(job.cluster)] in af(listed)
    schedd.remove(job)


def test_a_broker_that_is_down_is_one_line_without_its_password(tmp_path):
    (tmp_path / "job.sub").write_text("executable = /bin/true\nqueue\n")
    result = subprocess.run([sys.executable, "-m", "birdbath_client.cli", "amqp-submit", str(tmp_path / "job.sub"),
                             "-broker", "amqp://guest:secret@127.0.0.1:1/%2F"], capture_output=True, text=True,
                            timeout=60)
    assert (result.returncode, result.stderr) == (
        1, "birdbath: the AMQP broker at amqp://guest:***@127.0.0.1:1/%2F: cannot connect: connection refused\n")


def test_an_answer_that_is_no_soap_is_one_line(gateway):
    """Something between us and the gateway (a proxy's page) answers the operations with HTML: an error line, not
    zeep's traceback."""
    import http.server
    import threading
    import urllib.request

    wsdl = urllib.request.urlopen(gateway.url + "condorSchedd.wsdl", timeout=30).read()

    class Proxy(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the WSDL, naming this server as the service's address
            self._answer(wsdl.replace(gateway.url.rstrip("/").encode(), f"http://127.0.0.1:{port}".encode()))

        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            self._answer(b"<html><body>Service temporarily unavailable</body></html>", b"text/html")

        def _answer(self, body: bytes, kind: bytes = b"text/xml") -> None:
            self.send_response(200)
            self.send_header("Content-Type", kind.decode())
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        result = subprocess.run([sys.executable, "-m", "birdbath_client.cli", "-url", f"http://127.0.0.1:{port}/",
                                 "q", "-allusers"], capture_output=True, text=True, timeout=60)
    finally:
        server.shutdown()
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"birdbath: the answer of http://127.0.0.1:{port}/ to getJobAds is no Birdbath "
                                    f"answer: ") and result.stderr.count("\n") == 1, result.stderr


# -- options as HTCondor's tools take them ---------------------------------------------------------------------
@pytest.mark.parametrize("where", [(), ("q",), ("submit",), ("wait",)])
@pytest.mark.parametrize("flag", ["-h", "-help", "--help"])
def test_help_in_every_spelling(where, flag):
    shown = subprocess.run([sys.executable, "-m", "birdbath_client.cli", *where, flag], capture_output=True,
                           text=True, timeout=60)
    assert (shown.returncode, shown.stderr) == (0, "") and shown.stdout.startswith("usage: birdbath")


def test_version_and_url_after_the_command(gateway):
    from importlib.metadata import version

    for flag in ("-version", "--version"):
        shown = subprocess.run([sys.executable, "-m", "birdbath_client.cli", flag], capture_output=True, text=True,
                               timeout=60)
        assert (shown.returncode, shown.stdout) == (0, f"birdbath {version('birdbath-client')} (birdbath-client)\n")
    after = subprocess.run([sys.executable, "-m", "birdbath_client.cli", "version", "-url", gateway.url],
                           capture_output=True, text=True, timeout=60)
    assert after.returncode == 0 and "$CondorVersion" in after.stdout, after.stderr
    # the one after the command wins over the one before it (and over BIRDBATH_URL)
    wins = subprocess.run([sys.executable, "-m", "birdbath_client.cli", "-url", "http://127.0.0.1:1/", "version",
                           "--url", gateway.url], capture_output=True, text=True, timeout=60)
    assert wins.returncode == 0, wins.stderr
    down = subprocess.run([sys.executable, "-m", "birdbath_client.cli", "version", "-url", "http://127.0.0.1:1/"],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "BIRDBATH_URL": gateway.url})
    assert down.returncode == 1 and "127.0.0.1:1" in down.stderr


def test_submit_append_batch_name_and_definitions(gateway, schedd, tmp_path):
    (tmp_path / "job.sub").write_text("executable = /bin/echo\narguments = $(greeting) $(Process)\n"
                                      "output = out.$(Process)\nrequirements = false\nqueue 2\n")
    name = unique("nightly")
    result = birdbath(gateway, "submit", "greeting=hello", str(tmp_path / "job.sub"), "-a", "+Color = \"blue\"",
                      "-append", "priority = 7", "-batch-name", name)
    assert result.returncode == 0, result.stderr
    (cluster,) = submitted_clusters(result)
    shown = birdbath(gateway, "q", str(cluster), "-af:t", "Args", "Color", "JobPrio", "JobBatchName").stdout
    assert shown == f"hello 0\tblue\t7\t{name}\nhello 1\tblue\t7\t{name}\n"
    twice = birdbath(gateway, "submit", str(tmp_path / "job.sub"), str(tmp_path / "job.sub"))
    assert twice.returncode == 2 and "one submit description file" in twice.stderr
    schedd.remove_cluster(cluster)


def test_submit_dry_run_sends_nothing_and_needs_no_gateway(tmp_path):
    (tmp_path / "job.sub").write_text("executable = /bin/echo\narguments = $(Cluster).$(Process)\nqueue 2\n"
                                      "executable = /bin/true\nqueue\n")
    down = ["--url", "http://127.0.0.1:1/"]  # nothing answers there: a dry run does not ask
    result = subprocess.run([sys.executable, "-m", "birdbath_client.cli", *down, "submit", str(tmp_path / "job.sub"),
                             "-dry-run", str(tmp_path / "ads")], capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout) == (0, "2 job(s) dry-run to cluster 1.\n1 job(s) dry-run to cluster 2.\n")
    ads = (tmp_path / "ads").read_text().split("\n\n")
    assert [ad.splitlines()[:2] for ad in ads if ad] == [["ClusterId = 1", "ProcId = 0"], ["ClusterId = 1", "ProcId = 1"],
                                                         ["ClusterId = 2", "ProcId = 0"]]
    assert 'Args = "1.1"' in ads[1]
    shown = subprocess.run([sys.executable, "-m", "birdbath_client.cli", *down, "submit", str(tmp_path / "job.sub"),
                            "-dry-run", "-"], capture_output=True, text=True, timeout=60)
    assert shown.stdout.startswith("ClusterId = 1\nProcId = 0\n") and shown.stdout.endswith("to cluster 2.\n")
    (tmp_path / "bad.sub").write_text("executable = absent.sh\nqueue\n")
    refused = subprocess.run([sys.executable, "-m", "birdbath_client.cli", *down, "submit", str(tmp_path / "bad.sub"),
                              "-dry-run", "-"], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and "Can't open" in refused.stderr and refused.stdout == ""


def test_fetch_of_a_cluster_takes_every_job_and_one_upload_bar(gateway, tmp_path):
    (tmp_path / "job.sub").write_text("executable = /bin/echo\narguments = proc $(Process)\n"
                                      "output = out/job.$(Process).out\nshould_transfer_files = YES\nqueue 3\n")
    submitted = birdbath(gateway, "submit", "-spool", str(tmp_path / "job.sub"))
    assert submitted.returncode == 0, submitted.stderr
    size = Path("/bin/echo").stat().st_size
    assert submitted.stderr.count("uploading [") == 1  # one bar for the three jobs' files, written once (no tty)
    assert submitted.stderr == f"uploading [{'#' * 30}] {3 * size}/{3 * size} bytes\n"
    (cluster,) = submitted_clusters(submitted)
    assert birdbath(gateway, "wait", str(cluster)).returncode == 0
    fetched = birdbath(gateway, "fetch", str(cluster), str(tmp_path / "back"), "-close")
    assert fetched.returncode == 0, fetched.stderr
    assert [(tmp_path / "back" / "out" / f"job.{proc}.out").read_text() for proc in range(3)] == [
        "proc 0\n", "proc 1\n", "proc 2\n"]
    assert fetched.stderr.count("downloading [") == 3 and "\r" not in fetched.stderr
    gone = birdbath(gateway, "fetch", str(cluster), str(tmp_path / "again"))
    assert (gone.returncode, gone.stderr) == (1, f"birdbath: no job of cluster {cluster} is in the queue (its spool "
                                                 "went with it)\n")
    assert not (tmp_path / "again").exists()


def test_wait_writes_its_progress_once_where_stderr_is_no_terminal(gateway, schedd):
    (job,) = schedd.submit({"Cmd": "/bin/sh", "Arguments": "-c 'sleep 1'", "Requirements": Expr("TRUE")})
    waited = birdbath(gateway, "wait", str(job))
    assert waited.returncode == 0
    assert "\r" not in waited.stderr and waited.stderr.count("\n") == 1 and "Completed" in waited.stderr


# -- submit files from HTCondor's manual and test suite --------------------------------------------------------
def test_an_executable_chosen_at_match_time_is_not_checked_and_runs(gateway, tmp_path):
    """The manual's heterogeneous example: ``executable = prog.$$(OpSys).$$(Arch)`` names a file only once the
    job is matched with a slot; condor_submit does not look for it, and the slot's values pick it."""
    slot = Collector(gateway.url).machines()[0]
    program = tmp_path / f"prog.{slot['OpSys']}.{slot['Arch']}"
    program.write_text("#!/bin/sh\necho picked for $0\n")
    program.chmod(0o755)
    (tmp_path / "job.sub").write_text("executable = prog.$$(OpSys).$$(Arch)\noutput = out.txt\nqueue\n")
    submitted = birdbath(gateway, "submit", str(tmp_path / "job.sub"))
    assert submitted.returncode == 0, submitted.stderr
    (cluster,) = submitted_clusters(submitted)
    assert birdbath(gateway, "wait", f"{cluster}.0").returncode == 0
    assert poll(lambda: (tmp_path / "out.txt").exists() and (tmp_path / "out.txt").read_text(),
                "the output") == f"picked for {program}\n"
    spooled = birdbath(gateway, "submit", "-spool", str(tmp_path / "job.sub"))
    assert (spooled.returncode, spooled.stdout) == (1, "")
    assert "is chosen when the job is matched with a slot ($$()), so it cannot be spooled" in spooled.stderr


def test_an_environment_full_of_shell_characters_with_getenv(gateway, tmp_path):
    """In the spirit of HTCondor's job_core_env_van test: an old-syntax environment (``;`` between variables)
    whose values hold every shell metacharacter, and ``getenv = true``; the job sees each value as written."""
    (tmp_path / "env.sub").write_text(
        "universe = vanilla\nexecutable = /usr/bin/env\noutput = env.out\nlog = env.log\nnotification = never\n"
        "environment = v1=\"x;v2=&;v3=>/dev/null;v4=\\\" | cat;v5=-a environment = no=yes;v6=`date`;v7=\\n;"
        "v8=!@#$%^&*()><-_+=|;v9=;\ngetenv = true\nqueue\n")
    submitted = subprocess.run(command(gateway, "submit", str(tmp_path / "env.sub")), capture_output=True, text=True,
                               timeout=120, env={**os.environ, "FROM_MY_SHELL": "kept"})
    assert submitted.returncode == 0, submitted.stderr
    (cluster,) = submitted_clusters(submitted)
    assert birdbath(gateway, "wait", f"{cluster}.0").returncode == 0
    seen = poll(lambda: (tmp_path / "env.out").exists() and (tmp_path / "env.out").read_text(), "the output")
    lines = seen.splitlines()
    for expected in ('v1="x', "v2=&", "v3=>/dev/null", 'v4=\\" | cat', "v5=-a environment = no=yes", "v6=`date`",
                     "v7=\\n", "v8=!@#$%^&*()><-_+=|", "v9=", "FROM_MY_SHELL=kept"):
        assert expected in lines, expected


def test_an_environment_that_is_not_utf8_is_one_clear_line(tmp_path):
    (tmp_path / "env.sub").write_text("executable = /bin/true\ngetenv = true\nqueue\n")
    environment = {**os.environ, "NOT_UTF8": "caf\udce9"}  # the byte 0xe9 alone, as a Latin-1 shell would set it
    refused = subprocess.run([sys.executable, "-m", "birdbath_client.cli", "submit", str(tmp_path / "env.sub"),
                              "-dry-run", "-"], capture_output=True, text=True, timeout=60, env=environment)
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.startswith("birdbath: ERROR: the job's Environment holds text that is not UTF-8 (getenv "
                                     "= true copies your environment into it): byte 0xe9 at ")


def test_a_dry_run_with_spool_shows_the_ad_condor_submit_writes(tmp_path):
    (tmp_path / "job.sub").write_text("executable = /bin/echo\noutput = out/job.$(Cluster).$(Process).out\n"
                                      "should_transfer_files = YES\nqueue\n")
    shown = subprocess.run([sys.executable, "-m", "birdbath_client.cli", "submit", "-spool", str(tmp_path / "job.sub"),
                            "-dry-run", "-"], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and 'Out = "out/job.1.0.out"\n' in shown.stdout, shown.stderr

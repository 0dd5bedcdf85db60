"""The ``birdbath`` command, run as a user would."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest


def birdbath(gateway, *args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "birdbath_client.cli", "--url", gateway.url, *args],
                          capture_output=True, text=True, timeout=120, cwd=cwd)


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
    assert "downloading [" in fetched.stderr


def test_q_shows_a_condor_q_table_and_constraints_work(gateway, tmp_path):
    (tmp_path / "idle.sub").write_text("executable = /bin/sleep\narguments = 100\nrequirements = false\n"
                                       "+Tag = \"cli-q\"\nqueue\n")
    submitted = birdbath(gateway, "submit", str(tmp_path / "idle.sub"))
    job = submitted.stdout.split("cluster ")[1].rstrip(".\n") + ".0"
    table = birdbath(gateway, "q", "-constraint", 'Tag == "cli-q"')
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
    assert again.returncode == 1 and "FAIL" in again.stderr


def test_submit_dag_and_wait_exits_with_the_dag_status(gateway, tmp_path):
    (tmp_path / "bad.sub").write_text("executable = /bin/false\nqueue\n")
    (tmp_path / "bad.dag").write_text("JOB A bad.sub\n")
    result = birdbath(gateway, "submit_dag", str(tmp_path / "bad.dag"), "--wait")
    assert result.returncode == 1 and "exit code 1" in result.stdout
    assert (tmp_path / "bad.dag.rescue001").exists()


def test_a_gateway_that_is_down(tmp_path):
    result = subprocess.run([sys.executable, "-m", "birdbath_client.cli", "--url", "http://127.0.0.1:1/", "q"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and result.stderr.startswith("birdbath: cannot read the WSDL of the gateway")

"""The kill -9 fault matrix: a real gateway is killed with SIGKILL at each point where a crash could lose, repeat or
strand work, restarted on the same state directory, and must then show that

- every committed job is there exactly once (in the queue or the history, never both, nothing else), and
  nothing uncommitted is visible (no job, no spool directory, no transaction);
- no job ran again after it completed (each job appends a line to a file outside its spool: the lines are counted);
- no cluster id is handed out twice (a new cluster is larger than any seen before the kill);
- every job that was running moves on (requeued and run again, completed or held), none is left "running"
  without a process.

Each point is its own test case on its own state directory; jobs are short (a second or two) and the gateway
starts in about a second, so the whole matrix takes some 30 s.  The rules behind it are tested on a fake clock in
tests/test_scheduler_unit.py; single crash cases in tests/test_recovery.py, test_durability.py and test_dags.py.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from contextlib import closing
from pathlib import Path
from typing import Callable

import pytest

from backends.local.sandbox import ExecuteDir
from tests.birdbath import ad, begin, expr, new_job
from tests.conftest import zeep_client
from tests.dags import node_clusters, submit_dag, wait_for_dag, write_dag
from tests.test_durability import spool_of
from tests.test_execution import job, status_is, submit, wait_for, wait_until

JobKey = tuple[int, int]
CONFIG = "[backends.local]\nslots = 3\nkill_grace = 1.0\nperiodic_interval = 0.5\n"
FINAL = ("4", "5")  # completed, held


class Matrix:
    """One point's gateway and client, and what the test knows about the jobs: which were committed, which not,
    which were running when the gateway was killed, and which had completed by then."""

    def __init__(self, gateway, directory: Path) -> None:
        self.gateway = gateway
        self.directory = directory
        self.schedd = self._client()
        self.committed: set[JobKey] = set()
        self.uncommitted: set[JobKey] = set()
        self.transactions: list = []  # open when the gateway died: they die with it
        self.running: dict[JobKey, int] = {}  # job -> NumJobStarts when the gateway was killed
        self.done: dict[JobKey, str] = {}  # job -> its runs file, for jobs that completed before the kill
        self.clusters_seen = 0  # the largest cluster id handed out before the kill
        self.checks: list[Callable[[], None]] = []  # what this point adds to the common checks

    def _client(self):
        return zeep_client(self.gateway.url + "condorSchedd.wsdl", self.gateway.url)

    # -- jobs -------------------------------------------------------------------------------------------
    def counted(self, name: str, then: str = "") -> str:
        """A shell command that appends a line to ``<name>.runs`` (outside any spool), then does ``then``."""
        return f"echo run >> {self.directory / name}.runs" + (f"; {then}" if then else "")

    def runs(self, name: str) -> int:
        path = self.directory / f"{name}.runs"
        return len(path.read_text().splitlines()) if path.exists() else 0

    def submit(self, command: str, **attributes) -> JobKey:
        (key,) = submit(self.schedd, Cmd="/bin/sh", Arguments=f"-c '{command}'", Iwd=str(self.directory),
                        **attributes)
        self.committed.add(key)
        self.clusters_seen = max(self.clusters_seen, key[0])
        return key

    def until_rerun(self, name: str) -> str:
        """A job that runs until it is cut off the first time, and ends at once when it runs again."""
        return self.counted(name, f"test $(wc -l < {self.directory / name}.runs) -ge 2 || sleep 60")

    def until_gate(self, name: str) -> str:
        """A job that runs until the file ``gate`` exists (touched while no gateway runs)."""
        return self.counted(name, f"while ! test -e {self.directory / 'gate'}; do sleep 0.05; done")

    def completed_job(self, name: str = "done") -> JobKey:
        """A job that runs and completes before anything else happens."""
        key = self.submit(self.counted(name))
        wait_for(self.schedd, key, status_is(4))
        self.done[key] = name
        return key

    def wait_running(self, *keys: JobKey) -> None:
        for key in keys:
            wait_for(self.schedd, key, status_is(2))

    # -- the crash --------------------------------------------------------------------------------------
    def kill_leaving_uncommitted(self, txn, key: tuple[int, int]) -> None:
        """Kill while ``txn`` (which created ``key``, with files in its spool) is still open."""
        assert spool_of(self.gateway, *key).exists()
        self.uncommitted.add(key)
        self.transactions.append(txn)
        self.clusters_seen = max(self.clusters_seen, key[0])
        self.kill()

    def kill(self, *, at_once: bool = False) -> None:
        """SIGKILL the gateway (``at_once``: without asking first which jobs run); note the largest cluster id the
        queue file holds."""
        if not at_once:
            for key in self.committed:
                current = job(self.schedd, key)
                if current.get("JobStatus") == "2":
                    self.running[key] = int(current["NumJobStarts"])
        self.gateway.kill()
        queued, history = self.stored()
        self.clusters_seen = max([self.clusters_seen, *(cluster for cluster, _ in queued | history)])

    def restart(self) -> None:
        self.gateway.start()
        self.schedd = self._client()

    def stored(self) -> tuple[set[JobKey], set[JobKey]]:
        """The jobs in the queue file's queue and history tables."""
        with closing(sqlite3.connect(self.gateway.state_dir / "queue.sqlite3")) as db:
            queued = {(c, p) for c, p in db.execute("SELECT cluster, proc FROM jobs")}
            history = {(c, p) for c, p in db.execute("SELECT cluster, proc FROM history")}
        return queued, history

    # -- what must be true after the restart ------------------------------------------------------------
    def check(self) -> None:
        self.check_running_jobs_moved_on()
        for extra in self.checks:
            extra()
        self.check_exactly_once()
        self.check_nothing_uncommitted()
        self.check_completed_jobs_not_rerun()
        self.check_new_clusters_are_larger()

    def check_running_jobs_moved_on(self) -> None:
        for key, starts in self.running.items():
            wait_for(self.schedd, key, lambda current, starts=starts: current.get("JobStatus") != "2"
                     or int(current.get("NumJobStarts", 0)) > starts)

    def check_exactly_once(self) -> None:
        queued, history = self.stored()
        assert queued & history == set(), "a job is both queued and in the history"
        assert queued | history == self.committed, "the queue holds other jobs than the committed ones"
        for key in queued:
            assert job(self.schedd, key).get("ClusterId") == str(key[0])

    def check_nothing_uncommitted(self) -> None:
        for key in self.uncommitted:
            assert self.schedd.getJobAd(None, *key).status.code == "UNKNOWNJOB"
            assert not spool_of(self.gateway, *key).exists()
        for txn in self.transactions:
            assert self.schedd.commitTransaction(txn).code == "INVALIDTRANSACTION"

    def check_completed_jobs_not_rerun(self) -> None:
        for key, name in self.done.items():
            assert self.runs(name) == 1, f"job {key} ran again after it completed"
            assert job(self.schedd, key).get("NumJobStarts") == "1"

    def check_new_clusters_are_larger(self) -> None:
        txn = begin(self.schedd)
        assert self.schedd.newCluster(txn).integer > self.clusters_seen
        assert self.schedd.abortTransaction(txn).code == "SUCCESS"


# -- the points -------------------------------------------------------------------------------------------
def mid_transaction(m: Matrix) -> None:
    """A transaction with a submitted job and a complete file, not committed."""
    txn = begin(m.schedd, duration=600)
    key = new_job(m.schedd, txn)
    assert m.schedd.declareFile(txn, *key, "in.txt", 5, "NOHASH", None).code == "SUCCESS"
    assert m.schedd.sendFile(txn, *key, "in.txt", 0, b"input").code == "SUCCESS"
    assert m.schedd.submit(txn, *key, ad(Cmd="/bin/true", Requirements=expr("TRUE"))).status.code == "SUCCESS"
    m.kill_leaving_uncommitted(txn, key)


def between_commit_and_answer(m: Matrix) -> None:
    """Killed as soon as the commit is in the queue file, without waiting for the gateway's answer."""
    txn = begin(m.schedd, duration=600)
    cluster = m.schedd.newCluster(txn).integer
    keys = set()
    for _ in range(3):
        proc = m.schedd.newJob(txn, cluster).integer
        job_ad = ad(Cmd="/bin/sh", Arguments=f"-c '{m.counted(f'commit{proc}')}'", Iwd=str(m.directory),
                    Requirements=expr("TRUE"), LeaveJobInQueue=True)
        assert m.schedd.submit(txn, cluster, proc, job_ad).status.code == "SUCCESS"
        keys.add((cluster, proc))
    m.clusters_seen = max(m.clusters_seen, cluster)
    answered: list = []
    committing = threading.Thread(target=_commit, args=(m.schedd, txn, answered), daemon=True)
    with closing(sqlite3.connect(m.gateway.state_dir / "queue.sqlite3")) as db:
        committing.start()
        deadline = time.monotonic() + 10
        while not db.execute("SELECT count(*) FROM jobs WHERE cluster = ?", (cluster,)).fetchone()[0]:
            assert time.monotonic() < deadline, "the commit never reached the queue file"
        m.kill(at_once=True)  # the answer may not have been sent
    committing.join(timeout=30)
    m.committed |= keys  # the commit is durable: every one of its jobs must be there, once

    def ran_once() -> None:
        for key in keys:
            wait_for(m.schedd, key, status_is(4))
        assert [m.runs(f"commit{proc}") for _, proc in sorted(keys)] == [1, 1, 1]

    m.checks.append(ran_once)


def _commit(schedd, txn, answered: list) -> None:
    try:
        answered.append(schedd.commitTransaction(txn).code)
    except Exception as exc:  # the gateway died under the call
        answered.append(exc)


def mid_upload(m: Matrix) -> None:
    """A declared file half sent (sendFile chunks), its job not committed."""
    txn = begin(m.schedd, duration=600)
    key = new_job(m.schedd, txn)
    chunk = b"x" * 65536
    assert m.schedd.declareFile(txn, *key, "big.bin", 16 * len(chunk), "NOHASH", None).code == "SUCCESS"
    for offset in range(0, 5 * len(chunk), len(chunk)):
        assert m.schedd.sendFile(txn, *key, "big.bin", offset, chunk).code == "SUCCESS"
    m.kill_leaving_uncommitted(txn, key)


def running_job(m: Matrix) -> None:
    """A job running when the gateway dies: cut off, requeued and run again."""
    key = m.submit(m.until_rerun("running"))
    m.wait_running(key)
    wait_until(lambda: m.runs("running") == 1)
    m.kill()

    def rerun() -> None:
        again = wait_for(m.schedd, key, status_is(4))
        assert (again["NumJobStarts"], again["ExitCode"], m.runs("running")) == ("2", "0", 2)

    m.checks.append(rerun)


def dag_midway(m: Matrix) -> None:
    """A DAG A -> B -> C killed with A done and B running: B is run again, A never, and C once."""
    dag = write_dag(m.directory / "dag", "JOB A A.sub\nJOB B B.sub\nJOB C C.sub\nPARENT A CHILD B\nPARENT B CHILD C\n",
                    {"A": m.counted("A"), "B": m.until_rerun("B"), "C": m.counted("C")})
    key = submit_dag(m.schedd, dag)
    m.committed.add(key)
    m.clusters_seen = max(m.clusters_seen, key[0])
    wait_until(lambda: m.runs("A") == 1 and m.runs("B") == 1)
    (b_cluster,) = node_clusters(dag)["B"]
    m.wait_running((b_cluster, 0))
    m.committed |= {(cluster, 0) for clusters in node_clusters(dag).values() for cluster in clusters}
    m.kill()

    def resumed() -> None:
        done = wait_for_dag(m.schedd, key, timeout=30)
        assert done["ExitCode"] == "0" and done["NumJobStarts"] == "2"
        clusters = node_clusters(dag)
        assert {node: len(found) for node, found in clusters.items()} == {"A": 1, "B": 1, "C": 1}  # none resubmitted
        assert [m.runs(node) for node in "ABC"] == [1, 2, 1]  # B was cut off; A had completed
        m.committed.add((clusters["C"][0], 0))

    m.checks.append(resumed)


def unrecordable_end(m: Matrix) -> None:
    """Jobs whose end could not be recorded (an output that cannot be transferred back, counters a client set to
    anything) and a job cut off, all running at the kill; the first two end while no gateway runs."""
    bad_output = m.submit(m.until_gate("output"), ShouldTransferFiles="YES", TransferOutput="../x")
    counters = m.submit(m.until_gate("counters"), RemoteWallClockTime="oops", NumJobStarts="x")
    cut_off = m.submit(m.until_rerun("cut"))
    m.wait_running(bad_output, counters, cut_off)
    wait_until(lambda: m.runs("output") == m.runs("counters") == m.runs("cut") == 1)
    m.kill()
    (m.directory / "gate").touch()
    execute = m.gateway.state_dir / "execute"
    wait_until(lambda: all(ExecuteDir.of(execute, *key).result() is not None for key in (bad_output, counters)))

    def settled() -> None:
        held = wait_for(m.schedd, bad_output, lambda current: current.get("JobStatus") in FINAL)
        assert (held["JobStatus"], held["HoldReasonCode"]) == ("5", "12")
        assert held["HoldReason"] == "Transfer output files failure: '../x' was not created by the job"
        done = wait_for(m.schedd, counters, lambda current: current.get("JobStatus") in FINAL)
        assert (done["JobStatus"], done["ExitCode"], done["NumJobStarts"]) == ("4", "0", "1")
        again = wait_for(m.schedd, cut_off, status_is(4))
        assert again["NumJobStarts"] == "2"
        assert [m.runs(name) for name in ("output", "counters", "cut")] == [1, 1, 2]

    m.checks.append(settled)


POINTS = [mid_transaction, between_commit_and_answer, mid_upload, running_job, dag_midway, unrecordable_end]


@pytest.mark.parametrize("point", POINTS, ids=[point.__name__ for point in POINTS])
def test_a_kill_at(point, start_gateway, tmp_path):
    m = Matrix(start_gateway(CONFIG), tmp_path)
    m.completed_job()  # in every case: a job that completed before the crash must never run again
    point(m)
    assert m.gateway.process.poll() is not None, "the point did not kill the gateway"
    m.restart()
    m.check()

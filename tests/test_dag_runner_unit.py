"""The DAG runner's state machine alone: a fake in-memory DagHost, a synchronous ``call`` and a fake reactor whose
``spawnProcess`` records PRE/POST scripts that the test ends by hand.  A node job "ends" when the test feeds
``DagRun.job_changed`` its final ad, as the executor does."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import classad2
from twisted.internet import defer
from twisted.internet.error import ProcessDone, ProcessTerminated
from twisted.internet.testing import MemoryReactorClock
from twisted.python.failure import Failure

from backends.local.dag import language
from backends.local.dag.dagman import DagmanOptions
from backends.local.dag.runner import KEEPER, DagRun, DagSetup, Outcome, StopReason
from jobmodel.jobs import JobStatus

DAG_KEY = (10, 0)
DIAMOND = """\
JOB A a.sub
JOB B b.sub
JOB C c.sub
JOB D d.sub
PARENT A CHILD B C
PARENT B C CHILD D
"""


# -- fakes ----------------------------------------------------------------------------------------------
class FakeHost:
    """An in-memory queue for one DAG: node jobs get clusters 100, 101, ...; ``states`` says what
    node_job_states answers for a cluster (default: one proc, not finished)."""

    def __init__(self, setup: DagSetup, procs: int = 1) -> None:
        self.setup = setup
        self.procs = procs
        self.next_cluster = 100
        self.submitted: list[tuple[str, int, int]] = []  # (node, retry, cluster)
        self.in_queue: dict[tuple[str, int], int] = {}  # (node, retry) -> cluster: every node job the queue holds
        self.states: dict[int, tuple[int, dict[int, classad2.ClassAd]]] = {}
        self.removed: list[tuple[int, str]] = []
        self.saved: list[dict] = []
        self.cleared: list[int] = []

    def dag_setup(self, key):
        assert key == DAG_KEY
        return self.setup

    def submit_node(self, dag_key, dag, name, retry):
        assert dag_key == DAG_KEY and dag is self.setup.dag
        cluster = self.next_cluster
        self.next_cluster += 1
        self.submitted.append((name, retry, cluster))
        self.in_queue[(name, retry)] = cluster
        return cluster, self.procs

    def submitted_node_job(self, dag_cluster, name, retry):
        assert dag_cluster == DAG_KEY[0]
        return self.in_queue.get((name, retry))

    def node_job_states(self, cluster):
        return self.states.get(cluster, (self.procs, {}))

    def remove_node_jobs(self, dag_cluster, reason):
        self.removed.append((dag_cluster, reason))
        return 1

    def save_dag_state(self, dag_cluster, state):
        assert dag_cluster == DAG_KEY[0]
        self.saved.append(json.loads(state))

    def clear_dag_state(self, dag_cluster):
        self.cleared.append(dag_cluster)

    # what the test reads
    def names(self) -> list[str]:
        return [name for name, _, _ in self.submitted]

    def cluster_of(self, name: str) -> int:
        return [cluster for node, _, cluster in self.submitted if node == name][-1]

    def statuses(self) -> dict[str, str]:
        return {name: state["status"] for name, state in self.saved[-1].items()}

    @property
    def rescues(self) -> list[tuple[list[str], list[str]]]:
        """(nodes DONE, nodes failed) of each rescue DAG the run wrote next to its DAG file, in order."""
        dag = self.setup.options.dag
        found = []
        for path in sorted(dag.parent.glob(f"{dag.name}.rescue*")):
            lines = path.read_text().splitlines()
            listed = next(line for line in lines if line.endswith("<ENDLIST>")).lstrip("# ").split(",")[:-1]
            failed = [name for name in listed if name]
            found.append((sorted(line.split()[1] for line in lines if line.startswith("DONE ")), sorted(failed)))
        return found


@dataclass
class Script:
    protocol: Any
    executable: str
    args: list[str]
    path: str

    @property
    def command(self) -> list[str]:
        """What the keeper runs (after its ``--``)."""
        return self.args[self.args.index("--") + 1:]

    def exit(self, code: int) -> None:
        reason = ProcessDone(0) if code == 0 else ProcessTerminated(exitCode=code)
        self.protocol.processEnded(Failure(reason))


class ScriptReactor(MemoryReactorClock):
    def __init__(self) -> None:
        super().__init__()
        self.scripts: list[Script] = []

    def spawnProcess(self, processProtocol, executable, args=(), env=None, path=None, uid=None, gid=None,
                     usePTY=False, childFDs=None):
        self.scripts.append(Script(processProtocol, executable, list(args), path))
        return _Process()


class _Process:
    def signalProcess(self, name):
        pass


def call(function, *args, **kwargs):
    return defer.maybeDeferred(function, *args, **kwargs)


def setup_for(tmp_path: Path, text: str, saved: dict | None = None, max_jobs: int = 0) -> DagSetup:
    path = tmp_path / "test.dag"
    path.write_text(text)
    return DagSetup(log_path=tmp_path / "test.dag.dagman.out", dag=language.read(path),
                    options=DagmanOptions(dag=path, max_jobs=max_jobs), saved=saved or {})


def ended(cluster: int, proc: int = 0, exit_code: int = 0, status: JobStatus = JobStatus.COMPLETED,
          signal: int | None = None) -> classad2.ClassAd:
    ad = classad2.ClassAd()
    ad["ClusterId"], ad["ProcId"], ad["JobStatus"] = cluster, proc, int(status)
    if signal is not None:
        ad["ExitBySignal"], ad["ExitSignal"] = True, signal
    else:
        ad["ExitBySignal"], ad["ExitCode"] = False, exit_code
    return ad


class Driver:
    """One DagRun, started, and what it did."""

    def __init__(self, host: FakeHost, reactor: ScriptReactor | None = None) -> None:
        self.host = host
        self.reactor = reactor or ScriptReactor()
        self.run = DagRun(self.reactor, call, host, DAG_KEY)
        self.outcome: defer.Deferred = defer.Deferred.fromCoroutine(self.run.run())

    def finish(self, name: str, exit_code: int = 0, **kwargs) -> None:
        cluster = self.host.cluster_of(name)
        self.run.job_changed((cluster, 0), ended(cluster, exit_code=exit_code, **kwargs))

    def result(self) -> Outcome:
        assert self.outcome.called, "the DAG run has not ended"
        return self.outcome.result

    def log(self) -> str:
        return self.host.setup.log_path.read_text()


# -- running a DAG ----------------------------------------------------------------------------------------
def test_the_diamond_runs_a_then_b_and_c_then_d(tmp_path):
    dag = Driver(FakeHost(setup_for(tmp_path, DIAMOND)))
    assert dag.host.names() == ["A"]
    dag.finish("A")
    assert dag.host.names() == ["A", "B", "C"]
    dag.finish("C")
    assert dag.host.names() == ["A", "B", "C"]  # D waits for both parents
    dag.finish("B")
    assert dag.host.names() == ["A", "B", "C", "D"]
    assert not dag.outcome.called
    dag.finish("D")
    assert dag.result() == Outcome(0)
    assert [retry for _, retry, _ in dag.host.submitted] == [0, 0, 0, 0]
    assert dag.host.statuses() == {"A": "done", "B": "done", "C": "done", "D": "done"}
    assert dag.host.cleared == [10] and dag.host.rescues == []
    assert "All jobs Completed!" in dag.log() and "EXITING WITH STATUS 0" in dag.log()


def test_every_node_transition_is_saved_before_the_next_step(tmp_path):
    dag = Driver(FakeHost(setup_for(tmp_path, DIAMOND)))
    a = dag.host.saved[-1]["A"]
    assert (a["status"], a["cluster"]) == ("queued", 100)  # saved before waiting, so a restart never resubmits
    dag.finish("A")
    assert dag.host.saved[-1]["B"]["cluster"] == 101 and dag.host.saved[-1]["C"]["cluster"] == 102
    assert dag.host.saved[-1]["A"] == {"status": "done", "retries": 0, "cluster": 100, "job_return": 0,
                                       "pre_return": None}


def test_a_node_job_that_finished_before_the_runner_looked_is_not_waited_for(tmp_path):
    host = FakeHost(setup_for(tmp_path, "JOB A a.sub\n"))
    host.states[100] = (1, {0: ended(100, exit_code=0)})
    dag = Driver(host)
    assert dag.result() == Outcome(0)


def test_a_node_with_several_procs_waits_for_all_and_fails_on_any(tmp_path):
    dag = Driver(FakeHost(setup_for(tmp_path, "JOB A a.sub\n"), procs=2))
    dag.run.job_changed((100, 1), ended(100, 1, exit_code=4))
    assert not dag.outcome.called
    dag.run.job_changed((100, 0), ended(100, 0, exit_code=0))
    assert dag.result() == Outcome(1)
    assert dag.host.saved[-1]["A"]["job_return"] == 4


def test_noop_and_done_nodes_submit_nothing(tmp_path):
    dag = Driver(FakeHost(setup_for(tmp_path, "JOB A a.sub NOOP\nJOB B b.sub DONE\nJOB C c.sub\n"
                                              "PARENT A B CHILD C\n")))
    assert dag.host.names() == ["C"]
    dag.finish("C")
    assert dag.result() == Outcome(0)


def test_max_jobs_limits_the_nodes_in_flight(tmp_path):
    dag = Driver(FakeHost(setup_for(tmp_path, DIAMOND, max_jobs=1)))
    dag.finish("A")
    assert dag.host.names() == ["A", "B"]
    dag.finish("B")
    assert dag.host.names() == ["A", "B", "C"]


def test_category_maxjobs_limits_its_nodes(tmp_path):
    dag = Driver(FakeHost(setup_for(tmp_path, "JOB A a.sub\nJOB B b.sub\nJOB C c.sub\n"
                                              "CATEGORY A heavy\nCATEGORY B heavy\nMAXJOBS heavy 1\n")))
    assert dag.host.names() == ["A", "C"]
    dag.finish("A")
    assert dag.host.names() == ["A", "C", "B"]


# -- failures, retries and aborts -----------------------------------------------------------------------
def test_retry_resubmits_a_failed_node(tmp_path):
    dag = Driver(FakeHost(setup_for(tmp_path, "JOB A a.sub\nRETRY A 2\n")))
    dag.finish("A", exit_code=1)
    assert dag.host.submitted == [("A", 0, 100), ("A", 1, 101)]
    dag.finish("A", signal=9)
    assert dag.host.submitted[-1] == ("A", 2, 102)
    dag.finish("A")
    assert dag.result() == Outcome(0)
    assert dag.host.saved[-1]["A"]["retries"] == 2
    assert "Retrying node A (retry #2 of 2)" in dag.log()


def test_retries_run_out(tmp_path):
    dag = Driver(FakeHost(setup_for(tmp_path, "JOB A a.sub\nRETRY A 1\n")))
    dag.finish("A", exit_code=1)
    dag.finish("A", exit_code=2)
    assert dag.result() == Outcome(1)
    assert len(dag.host.submitted) == 2
    assert dag.host.rescues == [([], ["A"])]


def test_retry_unless_exit_does_not_retry_that_value(tmp_path):
    dag = Driver(FakeHost(setup_for(tmp_path, "JOB A a.sub\nRETRY A 5 UNLESS-EXIT 3\n")))
    dag.finish("A", exit_code=3)
    assert dag.result() == Outcome(1)
    assert dag.host.names() == ["A"]


def test_a_removed_node_job_fails_its_node(tmp_path):
    dag = Driver(FakeHost(setup_for(tmp_path, "JOB A a.sub\n")))
    dag.finish("A", status=JobStatus.REMOVED)
    assert dag.result() == Outcome(1)
    assert dag.host.saved[-1]["A"]["job_return"] == -1


def test_a_failure_ends_with_exit_1_and_a_rescue_dag(tmp_path):
    dag = Driver(FakeHost(setup_for(tmp_path, DIAMOND)))
    dag.finish("A")
    dag.finish("B", exit_code=5)
    assert not dag.outcome.called  # C still runs
    dag.finish("C")
    assert dag.result() == Outcome(1)
    assert dag.host.names() == ["A", "B", "C"]  # D never ran
    assert dag.host.rescues == [(["A", "C"], ["B"])]
    assert dag.host.statuses() == {"A": "done", "B": "failed", "C": "done", "D": "waiting"}
    assert dag.host.cleared == [10]
    assert "EXITING WITH STATUS 1" in dag.log()


def test_a_node_whose_submission_fails_counts_as_failed(tmp_path):
    host = FakeHost(setup_for(tmp_path, "JOB A a.sub\nRETRY A 1\n"))

    def refuse(*args):
        host.submitted.append(("A", args[3], None))
        raise ValueError("no such submit file")

    host.submit_node = refuse
    dag = Driver(host)
    assert dag.result() == Outcome(1)
    assert [retry for _, retry, _ in host.submitted] == [0, 1]
    assert "ERROR: submitting node A failed: no such submit file" in dag.log()


def test_abort_dag_on_removes_the_node_jobs_and_exits_with_its_return(tmp_path):
    dag = Driver(FakeHost(setup_for(tmp_path, DIAMOND + "ABORT-DAG-ON B 2 RETURN 7\n")))
    dag.finish("A")
    dag.finish("B", exit_code=2)
    assert dag.result() == Outcome(7)
    assert dag.host.removed == [(10, "DAG abort triggered by ABORT-DAG-ON")]
    assert dag.host.names() == ["A", "B", "C"]
    assert dag.host.rescues == [(["A"], ["B"])]
    assert dag.host.cleared == [10]
    assert "EXITING WITH STATUS 7" in dag.log()


def test_abort_dag_on_without_return_exits_with_the_nodes_value(tmp_path):
    dag = Driver(FakeHost(setup_for(tmp_path, "JOB A a.sub\nRETRY A 3\nABORT-DAG-ON A 4\n")))
    dag.finish("A", exit_code=4)
    assert dag.result() == Outcome(4)
    assert dag.host.names() == ["A"]  # an abort is not retried


# -- stopping and resuming ------------------------------------------------------------------------------
def test_a_hold_saves_the_state_and_leaves_the_node_jobs(tmp_path):
    dag = Driver(FakeHost(setup_for(tmp_path, DIAMOND)))
    dag.finish("A")
    dag.run.stop(StopReason.HOLD)
    assert dag.result() == Outcome(None)
    assert dag.host.statuses() == {"A": "done", "B": "queued", "C": "queued", "D": "waiting"}
    assert dag.host.removed == [] and dag.host.cleared == [] and dag.host.rescues == []
    assert "DAG runner stopped (DAGMan job held)" in dag.log()


def test_a_removal_removes_the_node_jobs_and_writes_a_rescue_dag(tmp_path):
    dag = Driver(FakeHost(setup_for(tmp_path, DIAMOND)))
    dag.finish("A")
    dag.run.stop(StopReason.REMOVE)
    assert dag.result() == Outcome(None)
    assert dag.host.removed == [(10, "DAGMan job was removed")]
    assert dag.host.rescues == [(["A"], [])]
    assert dag.host.cleared == [10]


def test_resuming_from_the_saved_state_does_not_resubmit_finished_or_queued_nodes(tmp_path):
    first = Driver(FakeHost(setup_for(tmp_path, DIAMOND)))
    first.finish("A")
    first.run.stop(StopReason.HOLD)
    assert first.result() == Outcome(None)
    saved = first.host.saved[-1]
    b, c = saved["B"]["cluster"], saved["C"]["cluster"]

    host = FakeHost(setup_for(tmp_path, DIAMOND, saved=saved))
    host.next_cluster = 200
    host.states[b] = (1, {0: ended(b, exit_code=0)})  # B finished while the DAG was held
    again = Driver(host)
    assert host.submitted == []  # A is done, B and C have their jobs already
    again.run.job_changed((c, 0), ended(c))
    assert host.submitted == [("D", 0, 200)]
    again.finish("D")
    assert again.result() == Outcome(0)
    assert "Resuming the DAG from its saved state" in again.log()


def test_a_node_job_committed_just_before_a_crash_is_found_and_followed_not_submitted_again(tmp_path):
    """The gateway died after C's job was committed and before the DAG's state said so: the saved state has C
    queued without a cluster, the queue has its job."""
    first = Driver(FakeHost(setup_for(tmp_path, DIAMOND)))
    first.finish("A")
    first.run.stop(StopReason.HOLD)
    saved = first.host.saved[-1]
    c = saved["C"]["cluster"]
    saved["C"]["cluster"] = None

    host = FakeHost(setup_for(tmp_path, DIAMOND, saved=saved))
    host.next_cluster = 200
    host.in_queue = dict(first.host.in_queue)
    again = Driver(host)
    assert host.submitted == [] and host.saved[-1]["C"]["cluster"] == c
    assert f"Node C was submitted as cluster {c} before the restart" in again.log()
    again.run.job_changed((c, 0), ended(c))
    again.run.job_changed((saved["B"]["cluster"], 0), ended(saved["B"]["cluster"]))
    assert host.submitted == [("D", 0, 200)]


def test_a_queued_node_without_a_job_anywhere_is_submitted_on_resume(tmp_path):
    first = Driver(FakeHost(setup_for(tmp_path, DIAMOND)))
    first.finish("A")
    first.run.stop(StopReason.HOLD)
    saved = first.host.saved[-1]
    saved["C"]["cluster"] = None  # the crash came before the commit: no job

    host = FakeHost(setup_for(tmp_path, DIAMOND, saved=saved))
    host.next_cluster = 200
    host.in_queue = {key: cluster for key, cluster in first.host.in_queue.items() if key[0] != "C"}
    Driver(host)
    assert host.submitted == [("C", 0, 200)]


# -- PRE and POST scripts (spawned on the fake reactor, ended by the test) ----------------------------------
def executable(path: Path) -> Path:
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_pre_and_post_scripts_run_around_the_node_job(tmp_path):
    executable(tmp_path / "pre.sh")
    executable(tmp_path / "post.sh")
    dag = Driver(FakeHost(setup_for(tmp_path, "JOB A a.sub\nSCRIPT PRE A pre.sh $JOB\n"
                                              "SCRIPT POST A post.sh $RETURN $JOBID\n")))
    [pre] = dag.reactor.scripts
    # under its keeper, a shell that takes the gateway's original stack limit, goes to the node's directory and
    # becomes the script
    assert pre.args[3] == str(KEEPER) and pre.args[5] == "--"
    assert pre.command[:2] == ["/bin/sh", "-c"] and pre.command[3:] == [str(tmp_path), str(tmp_path / "pre.sh"), "A"]
    assert dag.host.submitted == []  # the job waits for its PRE script
    pre.exit(0)
    assert dag.host.names() == ["A"]
    dag.finish("A", exit_code=3)
    post = dag.reactor.scripts[1]
    assert post.command[4:] == [str(tmp_path / "post.sh"), "3", "100.0"]
    assert not dag.outcome.called
    post.exit(0)  # the POST script decides: the node succeeds
    assert dag.result() == Outcome(0)


def test_a_failing_pre_script_fails_the_node_without_a_job(tmp_path):
    executable(tmp_path / "pre.sh")
    dag = Driver(FakeHost(setup_for(tmp_path, "JOB A a.sub\nSCRIPT PRE A pre.sh\n")))
    dag.reactor.scripts[0].exit(2)
    assert dag.result() == Outcome(1)
    assert dag.host.submitted == [] and dag.host.saved[-1]["A"]["pre_return"] == 2


def test_pre_skip_marks_the_node_done(tmp_path):
    executable(tmp_path / "pre.sh")
    dag = Driver(FakeHost(setup_for(tmp_path, "JOB A a.sub\nSCRIPT PRE A pre.sh\nPRE_SKIP A 9\n")))
    dag.reactor.scripts[0].exit(9)
    assert dag.result() == Outcome(0)
    assert dag.host.submitted == []


def test_a_script_that_is_not_executable_fails_without_being_spawned(tmp_path):
    (tmp_path / "pre.sh").write_text("#!/bin/sh\n")
    dag = Driver(FakeHost(setup_for(tmp_path, "JOB A a.sub\nSCRIPT PRE A pre.sh\n")))
    assert dag.reactor.scripts == []
    assert dag.result() == Outcome(1)
    assert "is not an executable file" in dag.log()


def test_a_dag_that_cannot_be_set_up_exits_1(tmp_path):
    host = FakeHost(DagSetup(log_path=tmp_path / "x.dagman.out", error="x.dag:3: unsupported DAG command 'SPLICE'"))
    dag = Driver(host)
    assert dag.result() == Outcome(1)
    assert "ERROR: x.dag:3: unsupported DAG command 'SPLICE'" in dag.log()
    assert host.saved == [] and host.submitted == []


def test_a_dag_its_owner_cannot_run_stops_without_touching_anything(tmp_path):
    """(the host has held the DAGMan job: its owner has no account here, so not even its log may be written)"""
    host = FakeHost(DagSetup(refused="The job's owner 'ghost' has no local account on this machine"))
    dag = Driver(host)
    assert dag.result() == Outcome(None)
    assert host.saved == [] and host.submitted == [] and host.cleared == [] and list(tmp_path.iterdir()) == []


def test_no_node_job_is_submitted_twice_in_one_run(tmp_path):
    dag = Driver(FakeHost(setup_for(tmp_path, DIAMOND)))
    for name in "ABCD":
        dag.finish(name)
        dag.finish(name)  # a repeated notice changes nothing
    assert dag.result() == Outcome(0)
    assert dag.host.names() == ["A", "B", "C", "D"]

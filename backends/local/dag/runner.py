"""Running one DAG: DAGMan's work, done by the gateway for a DAGMan job of the local backend.

A :class:`DagRun` lives in the reactor thread while its DAGMan job runs.  Nodes go through PRE script, node job
(submitted into the same queue, with ``DAGManJobId``), POST script, and RETRY; ABORT-DAG-ON, CATEGORY/MAXJOBS and
-MaxJobs/-MaxPre/-MaxPost are honoured.  Every node transition is saved durably, so a DAG whose DAGMan job stops
(held, gateway restart or crash) resumes where it was, like DAGMan's recovery mode, without re-running finished
nodes or submitting a node job twice.  Everything that touches the queue or the disk runs on the backend's thread.

A gateway running as root does the DAG's work with the rights of the DAGMan job's owner, as condor_dagman runs as
its user: PRE and POST scripts run as the owner, and every file the DAG names is read and written as the owner
(``files.py``), so a DAG cannot make the gateway read or write anything its owner could not.
"""

from __future__ import annotations

import enum
import json
import os
import re
import sys
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

import classad2
from twisted.internet import protocol as twisted_protocol
from twisted.internet.defer import Deferred, DeferredSemaphore
from twisted.logger import Logger

from jobmodel.classads import job_status
from jobmodel.jobs import JobStatus
from jobmodel.stacklimit import shell_stack_limit

from ..family import ControlConfig, end_cgroup
from ..owners import Account, to_switch
from . import dagman, files
from .dagman import DagmanLog, DagmanOptions
from .language import Dag, Node, Script

log = Logger()


class NodeStatus(str, enum.Enum):
    """Where a node is; the values are what the saved DAG state holds."""

    WAITING = "waiting"  # for its parents
    PRE = "pre"  # its PRE script runs
    QUEUED = "queued"  # its job is (to be) submitted, or in the queue
    POST = "post"  # its POST script runs
    DONE = "done"
    FAILED = "failed"


WAITING, PRE, QUEUED, POST, DONE, FAILED = NodeStatus
#: nodes a resumed DAG must pick up where they were
IN_PROGRESS = (PRE, QUEUED, POST)


class StopReason(enum.Enum):
    """Why a DAG run is asked to stop: a hold or a shutdown keeps its state for later, a removal ends it."""

    HOLD = "DAGMan job held"
    REMOVE = "DAGMan job removed"
    SHUTDOWN = "gateway shutdown"


class DagHost(Protocol):
    """What a DAG run needs of the queue it runs in (every call runs on the backend's thread)."""

    def dag_setup(self, key: tuple[int, int]) -> "DagSetup": ...

    def submit_node(self, dag_key: tuple[int, int], dag: Dag, name: str, retry: int) -> tuple[int, int]: ...

    def node_job_states(self, cluster: int) -> tuple[int, dict[int, classad2.ClassAd]]: ...

    def submitted_node_job(self, dag_cluster: int, name: str, retry: int) -> int | None: ...

    def remove_node_jobs(self, dag_cluster: int, reason: str) -> int: ...

    def save_dag_state(self, dag_cluster: int, state: str) -> None: ...

    def clear_dag_state(self, dag_cluster: int) -> None: ...


@dataclass
class DagSetup:
    """What a DAG run needs to start, read on the backend thread; ``error`` when the DAG cannot run at all (it
    exits 1 and says why in its log); ``refused`` when the DAGMan job cannot run here at all (its owner has no
    account here: the host has held it, and nothing may be read or written for it, not even the log).

    ``account`` is whose rights every file and script of the DAG is used with (None: the gateway's own, when it
    is not root or the owner is its own user); ``control`` how its scripts' processes are kept (``keeper.py``)."""

    log_path: Path | None = None
    account: Account | None = None
    refused: str | None = None
    dag: Dag | None = None
    options: DagmanOptions | None = None
    saved: dict[str, dict] = field(default_factory=dict)
    rescue: Path | None = None
    rescued: int = 0
    ignored: tuple[str, ...] = ()
    error: str | None = None
    control: ControlConfig = field(default_factory=ControlConfig)


#: $RETURN for a node job that was removed instead of finishing (DAGMan reports it as a failure)
REMOVED_RETURN = -1


@dataclass
class NodeState:
    status: NodeStatus = WAITING
    retries: int = 0  # retries used so far
    cluster: int | None = None  # the node job of the current try
    job_return: int | None = None
    pre_return: int | None = None


@dataclass
class Outcome:
    """How a DAG run ended: ``exit_code`` for the DAGMan job, or ``None`` when it was only stopped."""

    exit_code: int | None


class DagRun:
    def __init__(self, reactor: Any, call: Callable[..., Deferred], host: DagHost, key: tuple[int, int]) -> None:
        self._reactor = reactor
        self._call = call
        self._host = host
        self.key = key
        self.cluster = key[0]
        self._dag: Dag | None = None
        self._state: dict[str, NodeState] = {}
        self._finished: dict[int, dict[int, classad2.ClassAd]] = {}  # node job cluster -> proc -> final ad
        self._procs: dict[int, int] = {}  # node job cluster -> number of procs
        self._wakeup: Deferred | None = None
        self._node_waiters: list[Deferred] = []
        self._stopping: StopReason | None = None
        self._abort: int | None = None
        self._tasks: dict[str, Deferred] = {}
        self._scripts: set[Any] = set()
        self._log: Callable[[str], None] = lambda message: None
        self._setup: DagSetup | None = None
        self._script_limits: dict[str, DeferredSemaphore] = {}

    # -- what the executor tells us -----------------------------------------------------------------
    def job_changed(self, key: tuple[int, int], ad: classad2.ClassAd) -> None:
        if job_status(ad) in (JobStatus.COMPLETED, JobStatus.REMOVED):
            self._finished.setdefault(key[0], {})[key[1]] = ad
            self._wake()

    def stop(self, why: StopReason) -> None:
        """Stop running: a hold or a shutdown keeps the state for later, a removal also removes the nodes."""
        if self._stopping is None:
            self._stopping = why
            self._wake()

    # -- the run ------------------------------------------------------------------------------------
    async def run(self) -> Outcome:
        setup = await self._call(self._host.dag_setup, self.key)
        self._setup = setup
        if setup.refused is not None:
            log.warn("the DAG of job {job} does not run: {reason}", job=self.key, reason=setup.refused)
            return Outcome(None)
        dagman_out = await self._call(DagmanLog.open, setup.log_path, setup.account)
        self._log = dagman_out
        try:
            return await self._run(setup)
        finally:
            dagman_out.close()

    async def _run(self, setup: DagSetup) -> Outcome:
        if setup.error is not None:
            self._log(f"ERROR: {setup.error}")
            self._log("**** condor_scheduniv_exec (birdbath-gateway DAG runner) EXITING WITH STATUS 1")
            return Outcome(1)
        self._dag = setup.dag
        limits = {"PRE": setup.options.max_pre, "POST": setup.options.max_post}  # -MaxPre / -MaxPost
        self._script_limits = {kind: DeferredSemaphore(n) for kind, n in limits.items() if n > 0}
        self._state = {name: NodeState(**(saved | {"status": NodeStatus(saved["status"])}))
                       for name, saved in setup.saved.items()}
        self._begin_log(setup)
        for name, node in self._dag.nodes.items():
            self._state.setdefault(name, NodeState(status=DONE if node.done else WAITING))
        await self._find_unsaved_submissions()
        await self._save()
        try:
            return await self._loop()
        finally:
            for process in list(self._scripts):
                _kill(process)

    def _begin_log(self, setup: DagSetup) -> None:
        self._log("******************************************************")
        self._log(f"** birdbath-gateway DAG runner for DAGMan job {self.cluster}.{self.key[1]} "
                  f"(condor_dagman's work, done in the gateway)")
        self._log(f"** DAG file: {setup.dag.path}")
        if setup.ignored:
            self._log(f"** Ignored condor_dagman options: {' '.join(setup.ignored)}")
        if setup.saved:
            self._log("Resuming the DAG from its saved state (recovery)")
        elif setup.rescue is not None:
            self._log(f"Using rescue DAG {setup.rescue} ({setup.rescued} nodes marked DONE)")
        self._log(f"Dag contains {len(setup.dag.nodes)} nodes")

    async def _find_unsaved_submissions(self) -> None:
        """A node whose job was committed but whose cluster was not saved yet (the gateway died in between) has
        its job in the queue or the history already: found by its DAG, name and retry, as DAGMan's recovery finds
        it in the nodes log, it is followed instead of being submitted a second time."""
        for name, state in self._state.items():
            if state.status == QUEUED and state.cluster is None and not self._dag.nodes[name].noop:
                state.cluster = await self._call(self._host.submitted_node_job, self.cluster, name, state.retries)
                if state.cluster is not None:
                    self._log(f"Node {name} was submitted as cluster {state.cluster} before the restart")

    async def _loop(self) -> Outcome:
        for name, state in self._state.items():
            if state.status in IN_PROGRESS:  # resuming: pick the node up where it was
                self._start(name)
        while True:
            if self._stopping:
                return await self._stopped()
            if self._abort is not None:
                return await self._aborted()
            self._start_ready_nodes()
            if not self._tasks:
                return await self._all_nodes_ended()
            self._wakeup = Deferred()
            await self._wakeup

    def _start_ready_nodes(self) -> None:
        assert self._dag is not None
        for name, node in self._dag.nodes.items():
            state = self._state[name]
            if state.status != WAITING or name in self._tasks:
                continue
            if any(self._state[parent].status != DONE for parent in node.parents):
                continue
            if not self._has_room(node):
                continue
            state.status = PRE if node.pre else QUEUED
            self._start(name)

    def _has_room(self, node: Node) -> bool:
        assert self._dag is not None and self._setup is not None
        busy = [self._dag.nodes[name] for name in self._tasks]
        if self._setup.options.max_jobs and len(busy) >= self._setup.options.max_jobs:
            return False
        limit = self._dag.max_jobs.get(node.category or "")
        return not (node.category and limit and sum(1 for other in busy if other.category == node.category) >= limit)

    def _start(self, name: str) -> None:
        task = Deferred.fromCoroutine(self._run_node(name))
        self._tasks[name] = task
        task.addErrback(lambda failure: self._node_crashed(name, failure))
        task.addBoth(lambda _: self._task_done(name))

    def _task_done(self, name: str) -> None:
        self._tasks.pop(name, None)
        self._wake()

    def _node_crashed(self, name: str, failure: Any) -> None:
        log.failure("DAG {dag}: node {node} failed unexpectedly", failure, dag=self.cluster, node=name)
        self._log(f"ERROR: node {name} failed unexpectedly: {failure.getErrorMessage()}")
        self._state[name].status = FAILED

    # -- one node -----------------------------------------------------------------------------------
    async def _run_node(self, name: str) -> None:
        assert self._dag is not None
        node, state = self._dag.nodes[name], self._state[name]
        while not self._stopping and self._abort is None:
            if state.status == PRE:
                state.pre_return = await self._script(node, node.pre, "PRE", state)
                if self._stopping:
                    return
                if node.pre_skip is not None and state.pre_return == node.pre_skip:
                    self._log(f"PRE script of node {name} returned {state.pre_return}: PRE_SKIP, node succeeded")
                    state.status = DONE
                elif state.pre_return != 0:
                    self._log(f"PRE script of node {name} failed with status {state.pre_return}")
                    if await self._retry_or_fail(node, state, state.pre_return):
                        continue
                    return
                else:
                    state.status = QUEUED
                await self._save()
            if state.status == QUEUED:
                if node.noop:
                    self._log(f"Node {name} is a NOOP node: not submitting a job")
                    state.job_return = 0
                else:
                    if state.cluster is None:
                        try:
                            state.cluster = await self._submit(node, state)
                        except Exception as exc:  # a submit file condor_submit would refuse
                            self._log(f"ERROR: submitting node {name} failed: {exc}")
                            if await self._retry_or_fail(node, state, 1):
                                continue
                            return
                        await self._save()
                    state.job_return = await self._wait_for_job(name, state.cluster)
                    if state.job_return is None:  # stopped while waiting
                        return
                    self._log(f"Node {name} job {state.cluster} completed with return value {state.job_return}")
                if self._aborts(name, state.job_return):
                    return
                state.status = POST if node.post else DONE
                if state.status == DONE and state.job_return != 0:
                    if await self._retry_or_fail(node, state, state.job_return):
                        continue
                    return
                await self._save()
            if state.status == POST:
                post_return = await self._script(node, node.post, "POST", state)
                if self._stopping:
                    return
                if post_return != 0:
                    self._log(f"POST script of node {name} failed with status {post_return}")
                    if await self._retry_or_fail(node, state, post_return):
                        continue
                    return
                state.status = DONE
            if state.status == DONE:
                self._log(f"Node {name} succeeded")
                await self._save()
                return

    async def _retry_or_fail(self, node: Node, state: NodeState, value: int) -> bool:
        """After a failure: start the node over (True) or mark it failed (False)."""
        if state.retries < node.retries and value != node.retry_unless_exit:
            state.retries += 1
            state.status = PRE if node.pre else QUEUED
            state.cluster = state.job_return = state.pre_return = None
            self._log(f"Retrying node {node.name} (retry #{state.retries} of {node.retries})")
            await self._save()
            return True
        state.status = FAILED
        self._log(f"Node {node.name} failed")
        await self._save()
        return False

    def _aborts(self, name: str, value: int) -> bool:
        assert self._dag is not None
        rule = self._dag.abort_on.get(name)
        if rule is None or rule.value != value:
            return False
        self._abort = rule.dag_return if rule.dag_return is not None else value
        self._log(f"Aborting DAG because node {name} returned {value} (ABORT-DAG-ON)")
        self._state[name].status = FAILED
        self._wake()
        return True

    async def _submit(self, node: Node, state: NodeState) -> int:
        assert self._dag is not None
        self._log(f"Submitting HTCondor Node {node.name} job(s)...")
        cluster, procs = await self._call(self._host.submit_node, self.key, self._dag, node.name, state.retries)
        self._procs[cluster] = procs
        self._log(f"Submitted node {node.name} as cluster {cluster} ({procs} proc(s))")
        return cluster

    async def _wait_for_job(self, name: str, cluster: int) -> int | None:
        if cluster not in self._procs or len(self._finished.get(cluster, {})) < self._procs[cluster]:
            procs, finished = await self._call(self._host.node_job_states, cluster)
            self._procs[cluster] = procs
            for proc, ad in finished.items():
                self._finished.setdefault(cluster, {})[proc] = ad
        while len(self._finished.get(cluster, {})) < self._procs[cluster]:
            if self._stopping or self._abort is not None:
                return None
            waiter: Deferred = Deferred()
            self._node_waiters.append(waiter)
            await waiter
        return _return_value(self._finished[cluster].values())

    async def _script(self, node: Node, script: Script | None, kind: str, state: NodeState) -> int:
        assert script is not None and self._dag is not None
        directory = self._dag.directory_of(node)
        macros = {"JOB": node.name, "RETRY": str(state.retries), "MAX_RETRIES": str(node.retries),
                  "RETURN": str(state.job_return if state.job_return is not None else ""),
                  "PRE_SCRIPT_RETURN": str(state.pre_return if state.pre_return is not None else ""),
                  "JOBID": f"{state.cluster}.0" if state.cluster is not None else ""}
        executable = script.executable if os.path.isabs(script.executable) else str(directory / script.executable)
        arguments = [_expand(argument, macros) for argument in script.arguments]
        self._log(f"Running {kind} script of node {node.name}: {executable} {' '.join(arguments)}")
        if not await self._call(files.is_executable, self._account, executable):
            self._log(f"{kind} script of node {node.name}: {executable} is not an executable file")
            return 1
        limit = self._script_limits.get(kind)
        if limit is None:
            return await self._spawn_script(node, kind, executable, arguments, directory)
        return await limit.run(self._spawn_script, node, kind, executable, arguments, directory)

    async def _spawn_script(self, node: Node, kind: str, executable: str, arguments: list[str],
                            directory: Path) -> int:
        """Run a script under its keeper (``keeper.py``): every process the script starts is killed with it."""
        assert self._setup is not None
        protocol = _ScriptProcess()
        account = self._account
        command = [_SHELL, "-c", shell_stack_limit() + _START, str(directory), executable, *arguments]
        control = self._setup.control.for_process(f"dag_{self.cluster}_{uuid.uuid4().hex[:16]}")
        setup = {"control": control.as_spec(), "account": account.as_spec() if account is not None else None}
        # (the keeper switches to the owner before the shell starts; see _START for the directory)
        process = self._reactor.spawnProcess(protocol, sys.executable,
                                             [sys.executable, "-S", "-s", str(KEEPER), json.dumps(setup), "--",
                                              *command],
                                             env=(account or Account.current()).environment(),  # never the gateway's
                                             childFDs={0: "w", 1: "r", 2: "r"})
        self._scripts.add(process)
        try:
            result = await protocol.ended
        finally:
            self._scripts.discard(process)
            await self._call(end_cgroup, control)  # (a keeper that was killed could not end its script's processes)
        self._log(f"{kind} script of node {node.name} completed with status {result}")
        return int(result)

    # -- endings ------------------------------------------------------------------------------------
    async def _all_nodes_ended(self) -> Outcome:
        assert self._dag is not None
        failed = [name for name, state in self._state.items() if state.status == FAILED]
        if not failed:
            self._log("All jobs Completed!")
            self._log("**** condor_scheduniv_exec (birdbath-gateway DAG runner) EXITING WITH STATUS 0")
            await self._call(self._host.clear_dag_state, self.cluster)
            return Outcome(0)
        await self._write_rescue(failed)
        self._log("**** condor_scheduniv_exec (birdbath-gateway DAG runner) EXITING WITH STATUS 1")
        await self._call(self._host.clear_dag_state, self.cluster)
        return Outcome(1)

    async def _aborted(self) -> Outcome:
        await self._call(self._host.remove_node_jobs, self.cluster, "DAG abort triggered by ABORT-DAG-ON")
        await self._wait_for_tasks()
        failed = [name for name, state in self._state.items() if state.status not in (DONE,)]
        await self._write_rescue([name for name in failed if self._state[name].status == FAILED])
        self._log(f"**** condor_scheduniv_exec (birdbath-gateway DAG runner) EXITING WITH STATUS {self._abort}")
        await self._call(self._host.clear_dag_state, self.cluster)
        return Outcome(self._abort)

    async def _stopped(self) -> Outcome:
        if self._stopping is StopReason.REMOVE:
            self._log("DAGMan job removed: removing its node jobs")
            await self._call(self._host.remove_node_jobs, self.cluster, "DAGMan job was removed")
            await self._wait_for_tasks()
            await self._write_rescue([name for name, state in self._state.items() if state.status == FAILED])
            await self._call(self._host.clear_dag_state, self.cluster)
        else:
            self._log(f"DAG runner stopped ({self._stopping.value})"
                      ": node jobs keep running; the DAG resumes when its DAGMan job runs again")
            await self._wait_for_tasks()
            await self._save()
        return Outcome(None)

    async def _wait_for_tasks(self) -> None:
        for process in list(self._scripts):
            _kill(process)
        while self._tasks:
            self._wakeup = Deferred()
            await self._wakeup

    async def _write_rescue(self, failed: list[str]) -> None:
        assert self._dag is not None
        done = [name for name, state in self._state.items() if state.status == DONE]
        try:
            path = await self._call(dagman.write_rescue, self._dag, done, failed, self._account)
        except OSError as exc:
            self._log(f"ERROR: cannot write a Rescue DAG file for {self._dag.path}: {exc.strerror}")
            return
        self._log(f"Writing Rescue DAG file {path}")

    @property
    def _account(self) -> Account | None:
        """Whose rights the DAG's files and scripts are used with (None: the gateway's own)."""
        return to_switch(self._setup.account if self._setup is not None else None)

    async def _save(self) -> None:
        text = json.dumps({name: asdict(state) for name, state in self._state.items()})
        await self._call(self._host.save_dag_state, self.cluster, text)

    def _wake(self) -> None:
        waiters, self._node_waiters = self._node_waiters, []
        for waiter in waiters:
            if not waiter.called:
                waiter.callback(None)
        if self._wakeup is not None and not self._wakeup.called:
            wakeup, self._wakeup = self._wakeup, None
            wakeup.callback(None)



#: how a PRE or POST script starts, under its keeper: a shell (already its owner's: the keeper's child switched
#: before it executed the shell) takes the stack limit the gateway was started with, changes to the node's directory,
#: then becomes the script -- so the script has its limits from its first instruction, not set from outside once it
#: runs, and cannot start in a directory its owner could not have entered.
_SHELL = "/bin/sh"
_START = 'cd -- "$0" && exec "$@"'
KEEPER = Path(__file__).with_name("keeper.py")


def _expand(text: str, macros: dict[str, str]) -> str:
    return re.sub(r"\$(JOBID|JOB|RETRY|MAX_RETRIES|RETURN|PRE_SCRIPT_RETURN)\b",
                  lambda match: macros[match.group(1)], text)


def _return_value(ads: Any) -> int:
    """A node job's return value: the first failure among its procs (a signal as its negative number)."""
    for ad in ads:
        if job_status(ad) is JobStatus.REMOVED:
            return REMOVED_RETURN
        if ad.get("ExitBySignal") is True:
            return -int(ad.get("ExitSignal", 0))
        code = ad.get("ExitCode", 0)
        if isinstance(code, int) and code != 0:
            return code
    return 0


class _ScriptProcess(twisted_protocol.ProcessProtocol):
    """A PRE or POST script: ``ended`` fires with its exit status (128 + n for a signal, as a shell reports)."""

    def __init__(self) -> None:
        self.ended: Deferred = Deferred()

    def processEnded(self, reason: Any) -> None:
        code = getattr(reason.value, "exitCode", None)
        signal_number = getattr(reason.value, "signal", None)
        self.ended.callback(code if code is not None else 128 + int(signal_number or 0))


def _kill(process: Any) -> None:
    """Stop a script: its keeper kills every process of it, and ends."""
    try:
        process.signalProcess("TERM")
    except Exception:  # already gone
        pass

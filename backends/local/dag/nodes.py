"""The queue side of a DAG run: what :class:`~.runner.DagRun` asks of the local backend (its ``DagHost``).

Reading the DAG and its saved state, submitting node jobs into the same queue (as condor_submit would, with the
DAGMan attributes), reading how they ended, removing them, and saving the node states durably.  Every method runs on
the backend's thread.
"""

from __future__ import annotations

import json
import os
from functools import partial
from pathlib import Path

import classad2

from backends.interface import BackendError, Batch, InvalidState, NewJob
from jobmodel.classads import evaluate_string, job_status
from jobmodel.jobs import JobStatus

from .. import lifecycle
from ..family import ControlConfig
from ..jobspec import NULL_FILE
from ..owners import NoAccount
from ..queue import JobQueue
from ..store import JobKey
from . import dagman, files, language
from .language import Dag, DagSyntaxError
from .runner import DagSetup
from .submit import SubmitError, node_ads

#: node jobs in these states have ended (they count for their node, or are left alone by a removal)
ENDED = (JobStatus.COMPLETED, JobStatus.REMOVED)
#: whose a node job is: always its DAGMan job's values, never its submit file's (``+Owner = "root"`` in a node's
#: submit file must not make a job of someone else); a value the DAGMan job lacks is left to the queue to derive
OWNERSHIP = ("Owner", "User")


class NodeJobs:
    """Implements the DAG runner's ``DagHost`` over the local backend's queue.

    Whatever a DAG names is read and written as the DAGMan job's owner (the queue's account of the DAGMan job, as
    for every job of the backend), and its node jobs belong to that owner whatever their submit files say."""

    def __init__(self, queue: JobQueue, state_dir: Path, control: ControlConfig | None = None) -> None:
        self._queue = queue
        self._state_dir = state_dir
        self._control = control if control is not None else ControlConfig()  # how scripts' processes are kept

    def dag_setup(self, key: JobKey) -> DagSetup:
        ad = self._queue.store.get(key)
        if ad is None:
            return DagSetup(refused="the DAGMan job is no longer in the queue")
        try:
            account = self._queue.account_of(ad)
        except NoAccount as refused:  # nothing may be read or written for it: the job is held, as a starter would
            self._hold(key, ad, refused)
            return DagSetup(refused=refused.reason)
        iwd = Path(evaluate_string(ad, "Iwd") or self._state_dir)
        try:
            options = dagman.options(ad)
        except dagman.DagError as exc:
            return DagSetup(log_path=iwd / f"dagman-{key[0]}.dagman.out", account=account, error=str(exc))
        setup = DagSetup(log_path=dagman.dagman_log_path(ad, options.dag), options=options, ignored=options.ignored,
                         account=account, control=self._control)
        try:
            for name in ("Out", "Err"):
                target = evaluate_string(ad, name)
                if target and target != NULL_FILE:
                    files.touch(account, iwd / target)
            saved = self._queue.store.dag_state(key[0])
            setup.dag = language.read(options.dag, partial(files.read_text, account))
            if saved:
                setup.saved = json.loads(saved)
            else:
                setup.rescue = dagman.rescue_to_use(options, account)
                if setup.rescue is not None:
                    setup.rescued = language.apply_done(setup.dag, setup.rescue, partial(files.read_text, account))
            if options.lock_file is not None:
                files.write_text(account, options.lock_file, f"{os.getpid()}\n")
        except (DagSyntaxError, dagman.DagError) as exc:
            setup.error = str(exc)
        except OSError as exc:
            setup.error = f"cannot write {exc.filename}: {exc.strerror}"
        return setup

    def _hold(self, key: JobKey, ad: classad2.ClassAd, refused: NoAccount) -> None:
        try:
            transition = lifecycle.hold(ad, refused.reason, refused.code, self._queue.now())
        except InvalidState:  # held or removed meanwhile
            return
        self._queue.write_transitions({key: (ad, transition)})

    def submit_node(self, dag_key: JobKey, dag: Dag, name: str, retry: int) -> tuple[int, int]:
        """Submit a node's job(s) into the queue as one cluster; returns (cluster, number of procs).

        The submit file is read and translated as the DAGMan job's owner; the node jobs get that owner's ``Owner``
        and ``User`` whatever the submit file sets (the gateway's owner rules do not reach inside the backend)."""
        dag_ad = self._queue.store.get(dag_key)
        if dag_ad is None:
            raise SubmitError(f"node {name}: the DAGMan job is no longer in the queue")
        try:
            account = self._queue.account_of(dag_ad)
        except NoAccount as refused:
            raise SubmitError(f"node {name}: {refused.reason}") from None
        node = dag.nodes[name]
        directory = dag.directory_of(node)
        macros = {**node.variables, "JOB": name, "DAG_NODE_NAME": name, "RETRY": str(retry)}
        cluster = self._queue.store.next_cluster_id()
        try:
            ads = node_ads(_under(directory, node.submit_file), directory, macros, cluster, account)
            jobs = []
            for proc, job in enumerate(ads):
                job["ProcId"] = proc
                job["DAGManJobId"] = dag_key[0]
                job["DAGNodeName"] = name
                job["DAGParentNodeNames"] = ",".join(node.parents)
                job["DAGNodeRetry"] = retry
                job["UserLog"] = str(dag.path.with_name(dag.path.name + ".nodes.log"))
                for attribute in OWNERSHIP:
                    if isinstance(dag_ad.get(attribute), str):
                        job[attribute] = dag_ad[attribute]
                    elif attribute in job:
                        del job[attribute]
                if isinstance(dag_ad.get("Submission"), str):
                    job["Submission"] = dag_ad["Submission"]
                jobs.append(NewJob(cluster, proc, job))
            self._queue.commit(Batch(jobs))
        except (SubmitError, BackendError) as exc:
            raise SubmitError(f"node {name}: {exc}") from None
        return cluster, len(ads)

    def node_job_states(self, cluster: int) -> tuple[int, dict[int, classad2.ClassAd]]:
        """How many procs a node job has, and the final ads of those that finished (queue or history)."""
        finished: dict[int, classad2.ClassAd] = {}
        procs = 0
        for key in self._queue.store.keys_in_cluster(cluster):
            procs += 1
            ad = self._queue.store.get(key)
            if ad is not None and job_status(ad) in ENDED:
                finished[key[1]] = ad
        for ad in self._queue.history(classad2.ExprTree(f"ClusterId == {cluster}")):
            procs += 1
            finished[int(ad.get("ProcId", 0))] = ad
        return procs, finished

    def submitted_node_job(self, dag_cluster: int, name: str, retry: int) -> int | None:
        """The cluster of a node job this DAG submitted for ``name`` at ``retry``, in the queue or the history."""
        def wanted(ad: classad2.ClassAd) -> bool:
            return (ad.get("DAGManJobId") == dag_cluster and ad.get("DAGNodeName") == name
                    and ad.get("DAGNodeRetry") == retry)

        for key, ad in self._queue.store.ads():
            if wanted(ad):
                return key[0]
        constraint = classad2.ExprTree(f"DAGManJobId == {int(dag_cluster)} && DAGNodeName == {classad2.quote(name)}"
                                       f" && DAGNodeRetry == {int(retry)}")
        for ad in self._queue.history(constraint):
            return int(ad["ClusterId"])
        return None

    def remove_node_jobs(self, dag_cluster: int, reason: str) -> int:
        """Remove every queued job of a DAG (what OtherJobRemoveRequirements does for condor_dagman)."""
        now = self._queue.now()
        removed = {key: (ad, lifecycle.remove(ad, reason, now)) for key, ad in self._queue.store.ads()
                   if ad.get("DAGManJobId") == dag_cluster and job_status(ad) not in ENDED}
        self._queue.write_transitions(removed)
        return len(removed)

    def save_dag_state(self, dag_cluster: int, state: str) -> None:
        self._queue.store.save_dag_state(dag_cluster, state)

    def clear_dag_state(self, dag_cluster: int) -> None:
        self._queue.store.save_dag_state(dag_cluster, None)


def _under(base: Path, name: str) -> Path:
    return Path(name) if os.path.isabs(name) else base / name

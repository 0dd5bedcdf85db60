"""The queue side of a DAG run: what :class:`~.runner.DagRun` asks of the local backend (its ``DagHost``).

Reading the DAG and its saved state, submitting node jobs into the same queue (as condor_submit would, with the
DAGMan attributes), reading how they ended, removing them, and saving the node states durably.  Every method runs on
the backend's thread.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import classad2

from backends.interface import BackendError
from jobmodel.classads import evaluate_string, job_status
from jobmodel.jobs import JobStatus

from .. import lifecycle
from ..jobspec import NULL_FILE
from ..queue import JobQueue
from ..store import JobKey
from . import dagman, language
from .language import Dag, DagSyntaxError
from .runner import DagSetup
from .submit import SubmitError, node_ads

#: node jobs in these states have ended (they count for their node, or are left alone by a removal)
ENDED = (JobStatus.COMPLETED, JobStatus.REMOVED)


class NodeJobs:
    """Implements the DAG runner's ``DagHost`` over the local backend's queue."""

    def __init__(self, queue: JobQueue, state_dir: Path) -> None:
        self._queue = queue
        self._state_dir = state_dir

    def dag_setup(self, key: JobKey) -> DagSetup:
        ad = self._queue.store.get(key)
        iwd = Path(evaluate_string(ad, "Iwd") or self._state_dir) if ad is not None else self._state_dir
        fallback = DagSetup(log_path=iwd / f"dagman-{key[0]}.dagman.out")
        if ad is None:
            return fallback
        try:
            options = dagman.options(ad)
        except dagman.DagError as exc:
            fallback.error = str(exc)
            return fallback
        setup = DagSetup(log_path=dagman.dagman_log_path(ad, options.dag), options=options, ignored=options.ignored)
        for name in ("Out", "Err"):
            target = evaluate_string(ad, name)
            if target and target != NULL_FILE:
                (iwd / target).touch()
        saved = self._queue.store.dag_state(key[0])
        try:
            setup.dag = language.read(options.dag)
            if saved:
                setup.saved = json.loads(saved)
            else:
                setup.rescue = dagman.rescue_to_use(options)
                if setup.rescue is not None:
                    setup.rescued = language.apply_done(setup.dag, setup.rescue)
        except (DagSyntaxError, dagman.DagError) as exc:
            setup.error = str(exc)
        if options.lock_file is not None:
            options.lock_file.write_text(f"{os.getpid()}\n")
        return setup

    def submit_node(self, dag_key: JobKey, dag: Dag, name: str, retry: int) -> tuple[int, int]:
        """Submit a node's job(s) into the queue as one cluster; returns (cluster, number of procs)."""
        dag_ad = self._queue.store.get(dag_key)
        node = dag.nodes[name]
        directory = dag.directory_of(node)
        macros = {**node.variables, "JOB": name, "DAG_NODE_NAME": name, "RETRY": str(retry)}
        queue = self._queue
        txn = queue.begin()
        cluster = queue.new_cluster(txn)
        try:
            ads = node_ads(_under(directory, node.submit_file), directory, macros, cluster)
            for job in ads:
                proc = queue.new_proc(txn, cluster)
                job["ProcId"] = proc
                job["DAGManJobId"] = dag_key[0]
                job["DAGNodeName"] = name
                job["DAGParentNodeNames"] = ",".join(node.parents)
                job["DAGNodeRetry"] = retry
                job["UserLog"] = str(dag.path.with_name(dag.path.name + ".nodes.log"))
                for inherited in ("Owner", "Submission"):
                    if dag_ad is not None and isinstance(dag_ad.get(inherited), str):
                        job[inherited] = dag_ad[inherited]
                queue.submit(txn, cluster, proc, job)
        except (SubmitError, BackendError) as exc:
            queue.abort(txn)
            raise SubmitError(f"node {name}: {exc}") from None
        queue.commit(txn)
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

    def remove_node_jobs(self, dag_cluster: int, reason: str) -> int:
        """Remove every queued job of a DAG (what OtherJobRemoveRequirements does for condor_dagman)."""
        txn = self._queue.begin()
        removed = 0
        for key, ad in self._queue.store.ads():
            if ad.get("DAGManJobId") == dag_cluster and job_status(ad) not in ENDED:
                self._queue.record(txn, key, lifecycle.remove(ad, reason, self._queue.now()))
                removed += 1
        self._queue.commit(txn)
        return removed

    def save_dag_state(self, dag_cluster: int, state: str) -> None:
        self._queue.store.save_dag_state(dag_cluster, state)

    def clear_dag_state(self, dag_cluster: int) -> None:
        self._queue.store.save_dag_state(dag_cluster, None)

    def write_rescue(self, dag: Dag, done: list[str], failed: list[str]) -> Path:
        return dagman.write_rescue(dag, done, failed)


def _under(base: Path, name: str) -> Path:
    return Path(name) if os.path.isabs(name) else base / name

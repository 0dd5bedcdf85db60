"""Parallel-universe jobs (``JobUniverse = 11``) on the local backend: one job, several nodes started together.

condor_submit turns ``machine_count = N`` into ``MinHosts = MaxHosts = N`` and writes ``$(Node)`` as the marker
``#pArAlLeLnOdE#``, which the parallel shadow replaces with each node's number in that node's copy of the ad.  Here
the scheduler prepares one launch for the whole job: a sandbox and a plan per node (from the node's ad), under one
launcher that starts every node in the job's one process group and applies ``ParallelShutdownPolicy``
(``parallel_launch.py``), so hold, remove and crash recovery act on all nodes as on one job.

The user log gets what a parallel shadow writes: "Node N executing" for each node, then "Job executing on host:
MPI_job"; at the end "Node N terminated" for each node that ended by itself, then the job's own terminated event
(node 0's exit status is the job's).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import classad2

from jobmodel.classads import copy_ad, evaluate, evaluate_string
from jobmodel.jobs import Universe

from . import chirpconfig, jobspec, sandbox
from .chirpconfig import ChirpPlan
from .family import Control
from .lifecycle import Transition
from .owners import Account, to_switch
from .parallel_launch import WAIT_FOR_ALL
from .sandbox import ExecuteDir

#: what condor_submit writes for ``$(Node)``; each node's ad has its number there
NODE_MARKER = "#pArAlLeLnOdE#"
WAIT_FOR_NODE0 = "WAIT_FOR_NODE0"
#: the execute host a parallel shadow names in the job's execute event
PARALLEL_HOST = "MPI_job"


def is_parallel(ad: classad2.ClassAd) -> bool:
    return jobspec.universe_of(ad) == Universe.PARALLEL


def node_count(ad: classad2.ClassAd) -> int:
    """How many nodes the job runs: ``MaxHosts`` (what the dedicated scheduler claims), else ``MinHosts``, else
    ``MachineCount`` (a client that wrote the submit command's own name), at least 1."""
    for name in ("MaxHosts", "MinHosts", "MachineCount"):
        value = evaluate(ad, name)
        if isinstance(value, int) and not isinstance(value, bool):
            return max(1, value)
    return 1


def shutdown_policy(ad: classad2.ClassAd) -> str:
    """``WAIT_FOR_NODE0`` (HTCondor's default: the job ends when node 0 exits) or ``WAIT_FOR_ALL``."""
    return WAIT_FOR_ALL if evaluate_string(ad, "ParallelShutdownPolicy").upper() == WAIT_FOR_ALL else WAIT_FOR_NODE0


def node_ad(ad: classad2.ClassAd, node: int) -> classad2.ClassAd:
    """Node ``node``'s copy of the job ad: ``$(Node)`` replaced in every expression (as the parallel shadow's
    ``replaceNode`` does, on the expression's text), and ``Node`` set."""
    copy = copy_ad(ad)
    for name, value in ad.items():
        if isinstance(value, str) and NODE_MARKER in value:
            copy[name] = value.replace(NODE_MARKER, str(node))
        elif isinstance(value, classad2.ExprTree) and NODE_MARKER in str(value):
            copy[name] = classad2.ExprTree(str(value).replace(NODE_MARKER, str(node)))
    copy["Node"] = node
    return copy


def prepare(ad: classad2.ClassAd, directory: ExecuteDir, control: Control, account: Account | None,
            environment: dict[str, str]) -> ChirpPlan | None:
    """Create the job's execute directory with a scratch directory per node and write the launcher's spec: one
    plan per node (``nodes``, each from the node's ad) and the shutdown policy.  Returns the run's chirp servers,
    one per node (None: the job has no chirp)."""
    count = node_count(ad)
    directory.create(account)
    sandbox.write_job_ad(directory, ad, account)
    switched = to_switch(account)
    scratches = [node_scratch(directory, node, switched) for node in range(count)]
    chirp = chirpconfig.plan(ad, scratches, switched)
    nodes = []
    for node, scratch in enumerate(scratches):
        spec = sandbox.launch_spec(jobspec.plan(node_ad(ad, node), scratch, environment), directory)
        spec["environment"] |= {"_CONDOR_PROCNO": str(node), "_CONDOR_NPROCS": str(count),
                                "_CONDOR_SCRATCH_DIR": str(scratch)}
        chirpconfig.add_to_environment(spec["environment"], scratch, sandbox.libexec_of(directory), chirp is not None)
        nodes.append(spec | {"node": node})
    sandbox.write_spec(directory, {
        "account": switched.as_spec() if switched is not None else None, "nodes": nodes,
        "shutdown_policy": shutdown_policy(ad),
        "run_file": str(directory.run_file),
    }, control)
    return chirp


def node_scratch(directory: ExecuteDir, node: int, account: Account | None) -> Path:
    """Node ``node``'s own scratch directory (its sandbox), inside the job's and its owner's alone."""
    scratch = directory.sandbox / f"node{node}"
    scratch.mkdir()
    scratch.chmod(0o700)
    if account is not None:
        os.chown(scratch, account.uid, account.gid)
    return scratch


# -- the job's transitions ----------------------------------------------------------------------------------
def started(ad: classad2.ClassAd, transition: Transition) -> Transition:
    """A parallel job's start: every node's execute event, then the job's (on host ``MPI_job``), and
    ``CurrentHosts``."""
    count = node_count(ad)
    host = str(transition.updates.get("RemoteHost", ""))
    events = [_node_executing(node, f"<127.0.0.1:0?alias={host}>") for node in range(count)]
    events.append(lambda log: log.executing(PARALLEL_HOST))
    return Transition(transition.updates | {"CurrentHosts": count}, events)


def ended(ad: classad2.ClassAd, result: dict[str, Any] | None, transition: Transition) -> Transition:
    """A parallel run's end: "Node N terminated" for each node that ended by itself (in the launcher's result),
    before the job's own events; ``CurrentHosts`` back to 0."""
    nodes = result.get("nodes", []) if isinstance(result, dict) else []
    events = [_node_terminated(node) for node in nodes if isinstance(node, dict) and node.get("exited")]
    return Transition(transition.updates | {"CurrentHosts": 0}, [*events, *transition.events])


def _node_executing(node: int, host: str):
    return lambda log: log.node_executing(node, host)


def _node_terminated(node: dict[str, Any]):
    return lambda log: log.node_terminated(int(node.get("node", 0)), node.get("exit_code"), node.get("signal"),
                                           float(node.get("user_cpu", 0.0)), float(node.get("sys_cpu", 0.0)))

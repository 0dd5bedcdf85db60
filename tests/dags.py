"""Building DAG directories and submitting them through SOAP the way the CondorSubmitDAG.java recipe does."""

from __future__ import annotations

import re
import time
from pathlib import Path

from tests.birdbath import ad, begin, expr, new_job, values

RECIPE_ON_EXIT_REMOVE = "(ExitSignal =?= 11 || (ExitCode =!= UNDEFINED && ExitCode >=0 && ExitCode <= 2))"


def write_dag(directory: Path, dag: str, nodes: dict[str, str], name: str = "test.dag") -> Path:
    """A DAG file plus one submit file per node: ``nodes`` maps node name -> the shell command it runs."""
    directory.mkdir(parents=True, exist_ok=True)
    for node, command in nodes.items():
        quoted = command.replace("'", "''")
        (directory / f"{node}.sub").write_text(
            f"executable = /bin/sh\narguments = \"-c '{quoted}'\"\noutput = {node}.out\nerror = {node}.err\n"
            f"queue\n")
    path = directory / name
    path.write_text(dag)
    return path


def submit_dag(schedd, dag: Path, keep: bool = True, extra_arguments: str = "", **attributes) -> tuple[int, int]:
    """The job ad of the blog's diamond recipe, submitted in one transaction."""
    job = dict(
        Iwd=str(dag.parent), JobUniverse=7, Cmd="/usr/bin/condor_dagman", JobStatus=1,
        Env=f"_CONDOR_MAX_DAGMAN_LOG=0;_CONDOR_DAGMAN_LOG={dag}.dagman.out", JobNotification=0,
        UserLog=f"{dag}.dagman.log", RemoveKillSig="SIGUSR1", Out=f"{dag}.stdout", Err=f"{dag}.stderr",
        ShouldTransferFiles="NO", Requirements=expr("TRUE"), OnExitRemove=expr(RECIPE_ON_EXIT_REMOVE),
        Arguments=f"-f -l . -Debug 3 -AutoRescue 1 -DoRescueFrom 0 -Allowversionmismatch "
                  f"-Lockfile {dag}.lock -Dag {dag} {extra_arguments}".strip(),
    )
    if keep:
        job["LeaveJobInQueue"] = True
    job.update(attributes)
    txn = begin(schedd)
    cluster, proc = new_job(schedd, txn)
    answer = schedd.submit(txn, cluster, proc, ad(**job))
    assert answer.status.code == "SUCCESS", answer
    assert schedd.commitTransaction(txn).code == "SUCCESS"
    return cluster, proc


def dagman_out(dag: Path) -> str:
    path = Path(f"{dag}.dagman.out")
    return path.read_text() if path.exists() else ""


def node_clusters(dag: Path) -> dict[str, list[int]]:
    """node -> node job clusters, in submission order, from dagman.out."""
    found: dict[str, list[int]] = {}
    for node, cluster in re.findall(r"Submitted node (\S+) as cluster (\d+)", dagman_out(dag)):
        found.setdefault(node, []).append(int(cluster))
    return found


def wait_for_dag(schedd, key, timeout: float = 60) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    while True:
        answer = schedd.getJobAd(None, *key)
        current = values(answer.classAd) if answer.status.code == "SUCCESS" else {}
        if current.get("JobStatus") == "4":
            return current
        if time.monotonic() > deadline:
            raise AssertionError(f"DAG {key} did not finish; job {current}")
        time.sleep(0.05)

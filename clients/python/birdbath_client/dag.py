"""The DAGMan job ad condor_submit_dag would write for a .dag file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .ads import Expr

ON_EXIT_REMOVE = "(ExitSignal =?= 11 || (ExitCode =!= UNDEFINED && ExitCode >=0 && ExitCode <= 2))"


def dagman_ad(dag: Path, cluster: int, owner: str | None = None, keep: bool = True,
              dagman: str = "/usr/bin/condor_dagman", **extra: Any) -> dict[str, Any]:
    """Scheduler universe, ``condor_dagman -p 0 -f -l . -Lockfile ... -AutoRescue 1 -DoRescueFrom 0 -Dag ...``,
    its log in ``<dag>.dagman.out``, SIGUSR1 on removal, node jobs removed with it
    (``OtherJobRemoveRequirements``), and requeued if it exits abnormally.  ``keep`` leaves the finished job in
    the queue until its spool is closed, so its ExitCode can be read."""
    dag = dag.resolve()
    path = str(dag)
    ad: dict[str, Any] = {
        "JobUniverse": 7, "Cmd": dagman, "Iwd": str(dag.parent), "JobStatus": 1,
        "Arguments": f"-p 0 -f -l . -Lockfile {path}.lock -AutoRescue 1 -DoRescueFrom 0 -Dag {path} "
                     f"-Suppress_notification -Dagman {dagman}",
        "Environment": f"_CONDOR_DAGMAN_LOG={path}.dagman.out _CONDOR_MAX_DAGMAN_LOG=0",
        "UserLog": f"{path}.dagman.log", "Out": f"{path}.lib.out", "Err": f"{path}.lib.err",
        "RemoveKillSig": "SIGUSR1", "OtherJobRemoveRequirements": f"DAGManJobId =?= {cluster}",
        "OnExitRemove": Expr(ON_EXIT_REMOVE), "ShouldTransferFiles": "NO", "Requirements": Expr("TRUE"),
        "JobNotification": 0, "GetEnv": True,
    }
    if keep:
        ad["LeaveJobInQueue"] = Expr("FilesRetrieved =?= false")
        ad["FilesRetrieved"] = False
    if owner is not None:
        ad["Owner"] = owner
    ad.update(extra)
    return ad

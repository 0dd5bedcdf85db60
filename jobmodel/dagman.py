"""The DAGMan job ad condor_submit_dag writes for a .dag file, for a DAG whose files are in the job's spool (its Iwd):
every path is relative to it."""

from __future__ import annotations

from dataclasses import dataclass

import classad2

from .files import transfer_name_problem
from .submitfile import SubmitDescriptionError

#: condor_submit_dag's: removed when DAGMan exits normally, or after a segmentation fault (it then writes a rescue)
ON_EXIT_REMOVE = "(ExitSignal =?= 11 || (ExitCode =!= UNDEFINED && ExitCode >=0 && ExitCode <= 2))"
DAGMAN = "/usr/bin/condor_dagman"


def dagman_ad(dag: str, cluster: int, leave_in_queue: str) -> classad2.ClassAd:
    """Scheduler universe, ``condor_dagman -p 0 -f -l . -Lockfile ... -AutoRescue 1 -DoRescueFrom 0 -Dag ...``,
    its log in ``<dag>.dagman.out``, SIGUSR1 on removal, node jobs removed with it (``OtherJobRemoveRequirements``);
    ``leave_in_queue`` keeps the finished job queued so that its output can be fetched."""
    ad = classad2.ClassAd({
        "JobUniverse": 7, "Cmd": DAGMAN,
        "Arguments": f"-p 0 -f -l . -Lockfile {dag}.lock -AutoRescue 1 -DoRescueFrom 0 -Dag {dag} "
                     f"-Suppress_notification -Dagman {DAGMAN}",
        "Environment": f"_CONDOR_DAGMAN_LOG={dag}.dagman.out _CONDOR_MAX_DAGMAN_LOG=0",
        "UserLog": f"{dag}.dagman.log", "Out": f"{dag}.lib.out", "Err": f"{dag}.lib.err",
        "RemoveKillSig": "SIGUSR1", "ShouldTransferFiles": "NO", "JobNotification": 0})
    ad["OtherJobRemoveRequirements"] = classad2.ExprTree(f"DAGManJobId =?= {int(cluster)}")
    ad["OnExitRemove"] = classad2.ExprTree(ON_EXIT_REMOVE)
    ad["Requirements"] = classad2.ExprTree("true")
    ad["LeaveJobInQueue"] = classad2.ExprTree(leave_in_queue)
    return ad


@dataclass(frozen=True)
class DagDescription:
    """A DAG submitted as condor_submit_dag submits it: one DAGMan job (:func:`dagman_ad`) for the .dag file ``dag``
    in its spool, its ad made with the cluster id the schedd gives."""

    dag: str
    leave_in_queue: str

    def ads(self, cluster: int) -> list[classad2.ClassAd]:
        """The DAGMan job's ad; SubmitDescriptionError unless ``dag`` is a plain file name in its spool (it is
        written into DAGMan's arguments)."""
        problem = transfer_name_problem(self.dag)
        if problem is not None:
            raise SubmitDescriptionError(f"the DAG file {self.dag!r} is not a file in the job's spool: {problem}")
        return [dagman_ad(self.dag, cluster, self.leave_in_queue)]

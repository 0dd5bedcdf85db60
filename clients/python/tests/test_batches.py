"""condor_q's batch view, from ads alone: a DAG's node jobs are one batch under their DAGMan job's id."""

from __future__ import annotations

from birdbath_client import batches, tables
from birdbath_client.dag import dagman_ad

QDATE = 1_700_000_000


def job(cluster: int, status: int, **more) -> dict:
    return {"ClusterId": cluster, "ProcId": 0, "Owner": "al", "JobStatus": status, "QDate": QDATE, **more}


def test_a_dags_nodes_are_one_batch_named_after_the_dag():
    dagman = job(7, 2, JobUniverse=7, Cmd="/usr/bin/condor_dagman")
    ads = [job(5, 1), dagman, job(8, 2, DAGManJobId=7), job(9, 4, DAGManJobId=7)]
    lines = list(batches.view(ads, ads, "http://gateway/", now=QDATE))
    assert lines[2].split() == ["OWNER", "BATCH_NAME", "SUBMITTED", "DONE", "RUN", "IDLE", "TOTAL", "JOB_IDS"]
    assert lines[3].split()[1:3] + lines[3].split()[5:] == ["ID:", "5", "_", "_", "1", "1", "5.0"]
    assert lines[4].split()[1:3] + lines[4].split()[5:] == ["DAG:", "7", "1", "1", "_", "2", "8.0", "...", "9.0"]
    assert lines[-2] == "Total for query: 4 jobs; 1 completed, 0 removed, 1 idle, 2 running, 0 held, 0 suspended"


def test_the_dagman_jobs_command_as_condor_q_shows_it(tmp_path):
    """condor_q's CMD: the executable's name and the arguments, the DAG's files named as condor_submit_dag writes
    them beside the DAG (relative to the job's Iwd); a JobDescription instead, in parentheses, when the job has one."""
    dagman = job(7, 2, **dagman_ad(tmp_path / "diamond.dag", 7))
    (_, line) = tables.table((tables.COMMAND,), [dagman], now=QDATE)
    assert line == ("condor_dagman -p 0 -f -l . -Lockfile diamond.dag.lock -AutoRescue 1 -DoRescueFrom 0 "
                    "-Dag diamond.dag -Suppress_notification -Dagman /usr/bin/condor_dagman")
    node = job(8, 1, Cmd=str(tmp_path / "node.sh"), Arguments=f"{tmp_path}/x", Iwd=str(tmp_path))
    assert list(tables.table((tables.COMMAND,), [node]))[1] == f"node.sh {tmp_path}/x"  # only DAGMan's are shortened
    described = job(9, 1, Cmd="/bin/sleep", Arguments="60", JobDescription="nap")
    assert list(tables.table((tables.COMMAND,), [described]))[1] == "(nap)"

"""The QMF agent's object queries on a large queue read only what they need (gateway/qmf/objects.py): a job by its
id reads that job, a submission by its name its own jobs, the scheduler's counts two attributes of each job; every
answer is the one the class query gives for that object.  In this process on the local backend; counted in job ads
the backend hands the core, never timed (bench/qmf_queries.py times it)."""

from __future__ import annotations

import pytest

from gateway.qmf.schema import MRG_JOB, SCHEDULER, SUBMISSION, SUBMITTER
from tests.qmf_queue import CALLER, SCHEDD, ManyJobs
from tests.synchronous import run

CLUSTERS, PER_CLUSTER = 100, 100  # 10,000 jobs


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    queue = ManyJobs(tmp_path_factory.mktemp("many"), CLUSTERS, PER_CLUSTER)
    yield queue
    queue.close()


def named(many: ManyJobs, klass, key: str):
    many.read = 0
    return run(many.objects.named(CALLER, klass, key)), many.read


def test_a_job_by_its_id_reads_that_job_alone_and_is_what_the_class_query_gives(many):
    cluster = many.clusters[42]
    (job,), read = named(many, MRG_JOB, f"{cluster}.7")
    assert read == 1
    assert job.values["CustomId"] == f"{SCHEDD}#{cluster}.7" and job.values["ProcId"] == 7
    every = run(many.objects.of(CALLER, [MRG_JOB]))
    assert len(every) == CLUSTERS * PER_CLUSTER
    assert next(item for item in every if item.key == job.key) == job


def test_a_submission_by_its_name_reads_its_own_jobs(many):
    cluster = many.clusters[42]
    (by_cluster,), read = named(many, SUBMISSION, f"{SCHEDD}#{cluster}")
    assert read == PER_CLUSTER and by_cluster.values["Idle"] == PER_CLUSTER
    (by_name,), read = named(many, SUBMISSION, "named-9")
    assert read == PER_CLUSTER and by_name.values["Name"] == "named-9" and by_name.values["Owner"] == "nobody"
    every = run(many.objects.of(CALLER, [SUBMISSION]))
    assert {item.key: item for item in every}[by_cluster.key] == by_cluster
    # a cluster whose jobs name their own submission is not also the submission of its number
    assert named(many, SUBMISSION, f"{SCHEDD}#{many.clusters[9]}")[0] == []


@pytest.mark.parametrize("klass, key", [
    (MRG_JOB, "99999.0"), (MRG_JOB, "not a job"), (MRG_JOB, f"{SCHEDD}#1.0"), (MRG_JOB, "1.-1"),
    (SUBMISSION, "no such"), (SUBMISSION, f"{SCHEDD}#{10 ** 30}"), (SUBMISSION, 'x" || TRUE || "'),
    (SUBMISSION, f"other.example#{1}"), (SCHEDULER, "another schedd")])
def test_a_name_that_names_no_object_finds_none_and_reads_little(many, klass, key):
    found, read = named(many, klass, key)
    assert found == []
    assert read <= 1 or klass is SCHEDULER  # (the scheduler is read as its class is: one object)


def test_the_scheduler_and_submitters_count_every_job_from_two_attributes(many, monkeypatch):
    projections = []
    query = many.backend.query
    monkeypatch.setattr(many.backend, "query", lambda *args, **kwargs: projections.append(args[1:]) or
                        query(*args, **kwargs))
    (scheduler,), read = named(many, SCHEDULER, SCHEDD)
    assert read == CLUSTERS * PER_CLUSTER and projections == [(["JobStatus", "Owner"],)]
    assert scheduler.values["TotalIdleJobs"] == CLUSTERS * PER_CLUSTER and scheduler.values["NumUsers"] == 1
    (submitter,) = run(many.objects.of(CALLER, [SUBMITTER]))
    assert submitter.key == "nobody" and submitter.values["IdleJobs"] == CLUSTERS * PER_CLUSTER


def test_a_submission_named_by_its_cluster_gathers_its_dag_nodes_and_not_what_names_another(tmp_path):
    from gateway.core.adstruct import Attr, AttrType
    from gateway.core.transactions import NewCluster, WholeTransaction

    queue = ManyJobs(tmp_path, 3, 5)
    try:
        dag = queue.clusters[0]

        def plain(*extra: Attr) -> int:  # Birdbath's rules: no Submission of its own
            job = [Attr("Cmd", AttrType.STRING, "/bin/true"), Attr("Requirements", AttrType.EXPRESSION, "TRUE"),
                   *extra]
            return run(queue.schedd.submit_transaction(CALLER, WholeTransaction([NewCluster([job])]))).jobs[0][0]

        plain(Attr("DAGManJobId", AttrType.INTEGER, str(dag)))
        plain(Attr("DAGManJobId", AttrType.INTEGER, str(dag)), Attr("Submission", AttrType.STRING, "elsewhere"))
        alone = plain()
        (gathered,), read = named(queue, SUBMISSION, f"{SCHEDD}#{dag}")
        assert gathered.values["Idle"] == 6 and read == 6  # its 5 jobs and the node that names no other
        (single,), read = named(queue, SUBMISSION, f"{SCHEDD}#{alone}")
        assert single.values["Idle"] == 1 and read == 1
        every = {item.key: item for item in run(queue.objects.of(CALLER, [SUBMISSION]))}
        assert every[gathered.key] == gathered and every[single.key] == single and every["elsewhere"]
    finally:
        queue.close()

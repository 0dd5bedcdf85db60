"""DAGs submitted through SOAP run on the local backend (the blog's diamond, tests/dags.py)."""

from __future__ import annotations

import json
import sqlite3

import htcondor2

from backends.local.sandbox import ExecuteDir
from tests.birdbath import values
from tests.conftest import module_gateway, zeep_client
from tests.dags import dagman_out, node_clusters, submit_dag, wait_for_dag, write_dag
from tests.test_execution import RUNNER, empty_queue_afterwards, schedd, wait_until  # noqa: F401 (fixtures)

DIAMOND = "JOB A A.sub\nJOB B B.sub\nJOB C C.sub\nJOB D D.sub\nPARENT A CHILD B C\nPARENT B C CHILD D\n"


runner = module_gateway(RUNNER)


def counted(directory, node: str) -> str:
    """A node command that appends a line to <node>.runs each time it runs."""
    return f"echo run >> {directory}/{node}.runs"


def runs(directory, node: str) -> int:
    path = directory / f"{node}.runs"
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_the_diamond_dag_runs_in_order(schedd, tmp_path):
    gate = tmp_path / "gate"
    nodes = {n: counted(tmp_path, n) for n in "BCD"}
    nodes["A"] = f"{counted(tmp_path, 'A')}; while ! test -e {gate}; do sleep 0.05; done"  # A ends when we say
    dag = write_dag(tmp_path, DIAMOND, nodes)
    key = submit_dag(schedd, dag, keep=True, Submission="diamond-test")
    wait_until(lambda: "Submitted node A" in dagman_out(dag))
    seen = schedd.getJobAds(None, f"DAGManJobId == {key[0]}")
    (node,) = [values(item) for item in seen.classAdArray.item]
    assert node["DAGNodeName"] == "A" and node["Submission"] == "diamond-test"
    running = values(schedd.getJobAd(None, *key).classAd)
    assert running["JobStatus"] == "2"
    gate.touch()
    done = wait_for_dag(schedd, key)
    assert done["ExitCode"] == "0"
    assert all(runs(tmp_path, node) == 1 for node in "ABCD")
    clusters = {cluster: node for node, found in node_clusters(dag).items() for cluster in found}
    T = htcondor2.JobEventType
    events = [(clusters[e.cluster], e.type) for e in htcondor2.JobEventLog(f"{dag}.nodes.log").events(stop_after=0)]
    order = {(node, kind): index for index, (node, kind) in enumerate(events)}
    assert order[("A", T.JOB_TERMINATED)] < min(order[("B", T.EXECUTE)], order[("C", T.EXECUTE)])
    assert max(order[("B", T.JOB_TERMINATED)], order[("C", T.JOB_TERMINATED)]) < order[("D", T.EXECUTE)]
    assert "All jobs Completed!" in dagman_out(dag)
    assert (tmp_path / "test.dag.stdout").exists()


def test_node_jobs_carry_their_dag_attributes(schedd, tmp_path):
    dag = write_dag(tmp_path, "JOB A A.sub\nJOB B B.sub\nPARENT A CHILD B\n", {"A": "true", "B": "sleep 30"})
    key = submit_dag(schedd, dag)
    wait_until(lambda: "Submitted node B" in dagman_out(dag))
    (b,) = [values(item) for item in schedd.getJobAds(None, f"DAGManJobId == {key[0]}").classAdArray.item]
    assert b["DAGNodeName"] == "B" and b["DAGParentNodeNames"] == "A" and b["DAGManJobId"] == str(key[0])
    assert b["UserLog"] == f"{dag}.nodes.log" and b["Owner"] == values(schedd.getJobAd(None, *key).classAd)["Owner"]
    schedd.removeJob(None, *key, "done looking", False)


def test_retry_reruns_a_failed_node(schedd, tmp_path):
    flaky = f"{counted(tmp_path, 'B')}; test $(wc -l < {tmp_path}/B.runs) -ge 3"
    dag = write_dag(tmp_path, DIAMOND + "RETRY B 3\n", {"A": "true", "B": flaky, "C": "true", "D": "true"})
    done = wait_for_dag(schedd, submit_dag(schedd, dag))
    assert done["ExitCode"] == "0" and runs(tmp_path, "B") == 3
    assert "Retrying node B (retry #2 of 3)" in dagman_out(dag)


def test_retry_unless_exit_stops_retrying(schedd, tmp_path):
    dag = write_dag(tmp_path, "JOB A A.sub\nRETRY A 5 UNLESS-EXIT 4\n", {"A": f"{counted(tmp_path, 'A')}; exit 4"})
    done = wait_for_dag(schedd, submit_dag(schedd, dag))
    assert done["ExitCode"] == "1" and runs(tmp_path, "A") == 1


def test_pre_and_post_scripts_with_their_macros(schedd, tmp_path):
    (tmp_path / "pre.sh").write_text(f"#!/bin/sh\necho \"pre $1 retry $2\" >> {tmp_path}/scripts\n")
    (tmp_path / "post.sh").write_text(f"#!/bin/sh\necho \"post $1 return $2\" >> {tmp_path}/scripts\nexit $2\n")
    for script in ("pre.sh", "post.sh"):
        (tmp_path / script).chmod(0o755)
    dag = write_dag(tmp_path, "JOB A A.sub\nSCRIPT PRE A pre.sh $JOB $RETRY\nSCRIPT POST A post.sh $JOB $RETURN\n"
                              "RETRY A 1\n", {"A": "exit 3"})
    done = wait_for_dag(schedd, submit_dag(schedd, dag))
    assert done["ExitCode"] == "1"  # the POST script passed the job's failure on
    assert (tmp_path / "scripts").read_text().splitlines() == [
        "pre A retry 0", "post A return 3", "pre A retry 1", "post A return 3"]
    assert (tmp_path / "test.dag.rescue001").exists()


def test_scripts_run_in_a_login_environment_not_the_gateways(schedd, tmp_path):
    (tmp_path / "pre.sh").write_text(f"#!/bin/sh\nenv > {tmp_path}/environment\n")
    (tmp_path / "pre.sh").chmod(0o755)
    dag = write_dag(tmp_path, "JOB A A.sub\nSCRIPT PRE A pre.sh\n", {"A": "true"})
    wait_for_dag(schedd, submit_dag(schedd, dag))
    environment = dict(line.split("=", 1) for line in (tmp_path / "environment").read_text().splitlines())
    assert {"HOME", "USER", "LOGNAME", "PATH"} <= set(environment) and "PYTHONPATH" not in environment
    assert environment["PATH"] == "/usr/local/bin:/usr/bin:/bin"


def test_scripts_start_with_the_stack_limit_the_gateway_was_started_with(schedd, tmp_path):
    """Given before the script's first instruction (the shell that becomes the script sets it), not from outside."""
    import resource

    (tmp_path / "pre.sh").write_text(f"#!/bin/sh\nulimit -S -s > {tmp_path}/limit\n")
    (tmp_path / "pre.sh").chmod(0o755)
    dag = write_dag(tmp_path, "JOB A A.sub\nSCRIPT PRE A pre.sh\n", {"A": "true"})
    assert wait_for_dag(schedd, submit_dag(schedd, dag))["ExitCode"] == "0"
    soft, _ = resource.getrlimit(resource.RLIMIT_STACK)
    assert (tmp_path / "limit").read_text() == ("unlimited\n" if soft == resource.RLIM_INFINITY else f"{soft // 1024}\n")


def test_a_post_script_can_rescue_a_failed_job(schedd, tmp_path):
    (tmp_path / "ok.sh").write_text("#!/bin/sh\nexit 0\n")
    (tmp_path / "ok.sh").chmod(0o755)
    dag = write_dag(tmp_path, "JOB A A.sub\nSCRIPT POST A ok.sh\n", {"A": "exit 9"})
    assert wait_for_dag(schedd, submit_dag(schedd, dag))["ExitCode"] == "0"


def test_pre_skip_skips_the_job(schedd, tmp_path):
    (tmp_path / "skip.sh").write_text("#!/bin/sh\nexit 2\n")
    (tmp_path / "skip.sh").chmod(0o755)
    dag = write_dag(tmp_path, "JOB A A.sub\nSCRIPT PRE A skip.sh\nPRE_SKIP A 2\n", {"A": counted(tmp_path, "A")})
    assert wait_for_dag(schedd, submit_dag(schedd, dag))["ExitCode"] == "0"
    assert runs(tmp_path, "A") == 0


def test_abort_dag_on_stops_everything_with_its_return_value(schedd, tmp_path):
    dag = write_dag(tmp_path, "JOB A A.sub\nJOB B B.sub\nJOB C C.sub\nPARENT A CHILD C\nABORT-DAG-ON A 3 RETURN 7\n",
                    {"A": "sleep 0.3; exit 3", "B": "sleep 30", "C": counted(tmp_path, "C")})
    key = submit_dag(schedd, dag, OnExitRemove=True)
    done = wait_for_dag(schedd, key)
    assert done["ExitCode"] == "7" and runs(tmp_path, "C") == 0
    (b_cluster,) = node_clusters(dag)["B"]
    # removed: it leaves the queue once its process has been stopped (which may end after the DAGMan job)
    wait_until(lambda: schedd.getJobAd(None, b_cluster, 0).status.code == "UNKNOWNJOB")
    assert "ABORT-DAG-ON" in dagman_out(dag)


def test_a_failed_dag_writes_a_rescue_dag_and_a_rerun_uses_it(schedd, tmp_path):
    gate = tmp_path / "gate"
    nodes = {n: counted(tmp_path, n) for n in "ABD"}
    nodes["C"] = f"{counted(tmp_path, 'C')}; test -e {gate}"
    dag = write_dag(tmp_path, DIAMOND, nodes)
    first = wait_for_dag(schedd, submit_dag(schedd, dag))
    assert first["ExitCode"] == "1"
    rescue = (tmp_path / "test.dag.rescue001").read_text()
    assert "DONE A" in rescue and "DONE B" in rescue and "DONE C" not in rescue and "DONE D" not in rescue
    assert runs(tmp_path, "D") == 0
    gate.touch()
    second = wait_for_dag(schedd, submit_dag(schedd, dag))
    assert second["ExitCode"] == "0"
    assert [runs(tmp_path, n) for n in "ABCD"] == [1, 1, 2, 1]
    assert "Using rescue DAG" in dagman_out(dag)


def test_do_rescue_from_names_a_rescue_file(schedd, tmp_path):
    dag = write_dag(tmp_path, "JOB A A.sub\nJOB B B.sub\n", {n: counted(tmp_path, n) for n in "AB"})
    (tmp_path / "test.dag.rescue002").write_text("DONE A\n")
    key = submit_dag(schedd, dag, Arguments=f"-AutoRescue 0 -DoRescueFrom 2 -Dag {dag}")
    assert wait_for_dag(schedd, key)["ExitCode"] == "0"
    assert runs(tmp_path, "A") == 0 and runs(tmp_path, "B") == 1


def test_removing_the_dagman_job_removes_its_nodes(schedd, tmp_path):
    dag = write_dag(tmp_path, "JOB A A.sub\nJOB B B.sub\n", {"A": "sleep 30", "B": "sleep 30"})
    key = submit_dag(schedd, dag, keep=False)
    wait_until(lambda: len(node_clusters(dag)) == 2)
    clusters = [found[0] for found in node_clusters(dag).values()]
    for cluster in clusters:
        wait_until(lambda cluster=cluster: schedd.getJobAd(None, cluster, 0).status.code == "SUCCESS" and
                   values(schedd.getJobAd(None, cluster, 0).classAd)["JobStatus"] == "2")
    assert schedd.removeJob(None, *key, "cancel the DAG", False).code == "SUCCESS"
    for cluster in [key[0], *clusters]:
        wait_until(lambda cluster=cluster: schedd.getJobAd(None, cluster, 0).status.code == "UNKNOWNJOB")
    assert "removing its node jobs" in dagman_out(dag)


def test_holding_the_dagman_job_pauses_new_nodes(schedd, tmp_path):
    gate = tmp_path / "gate"
    dag = write_dag(tmp_path, "JOB A A.sub\nJOB B B.sub\nPARENT A CHILD B\n",
                    {"A": f"while ! test -e {gate}; do sleep 0.05; done", "B": counted(tmp_path, "B")})
    key = submit_dag(schedd, dag)
    wait_until(lambda: "Submitted node A" in dagman_out(dag))
    assert schedd.holdJob(None, *key, "pause the DAG", False, False, False).code == "SUCCESS"
    # once the runner says so it has left its loop: no node can be submitted until the DAGMan job runs again
    wait_until(lambda: "DAG runner stopped (DAGMan job held)" in dagman_out(dag))
    gate.touch()
    (a_cluster,) = node_clusters(dag)["A"]
    wait_until(lambda: schedd.getJobAd(None, a_cluster, 0).status.code == "UNKNOWNJOB")  # A finished
    assert values(schedd.getJobAd(None, *key).classAd)["JobStatus"] == "5"
    assert runs(tmp_path, "B") == 0 and "B" not in node_clusters(dag)
    assert schedd.releaseJob(None, *key, "go on", False, False).code == "SUCCESS"
    assert wait_for_dag(schedd, key)["ExitCode"] == "0" and runs(tmp_path, "B") == 1
    assert node_clusters(dag)["A"] == [a_cluster]  # A was not submitted again


def saved_dag_state(gateway, key) -> dict:
    """The DAG's node states as the gateway last saved them in its queue's SQLite file."""
    store = sqlite3.connect(gateway.state_dir / "queue.sqlite3")
    try:
        (text,) = store.execute("SELECT state FROM dag_state WHERE cluster = ?", (key[0],)).fetchone()
    finally:
        store.close()
    return json.loads(text)


def killed_while_c_runs(start_gateway, tmp_path):
    """The diamond on a gateway killed while node C's job runs (B done); C ends once ``gate`` exists.  The gateway,
    the DAG file, the DAGMan job's key, C's cluster and the gate."""
    gateway = start_gateway(RUNNER)
    schedd = zeep_client(gateway.url + "condorSchedd.wsdl", gateway.url)
    gate = tmp_path / "gate"
    dag = write_dag(tmp_path, DIAMOND, {"A": counted(tmp_path, "A"), "B": counted(tmp_path, "B"),
                                        "C": f"{counted(tmp_path, 'C')}; while ! test -e {gate}; do sleep 0.05; done",
                                        "D": counted(tmp_path, "D")})
    key = submit_dag(schedd, dag)
    wait_until(lambda: runs(tmp_path, "C") == 1 and runs(tmp_path, "B") == 1)
    (c_cluster,) = node_clusters(dag)["C"]
    # The DAG's state is saved after the node's commit, and a loaded machine may start C's job first.
    wait_until(lambda: saved_dag_state(gateway, key)["C"]["cluster"] == c_cluster)
    gateway.kill()
    return gateway, dag, key, c_cluster, gate


def test_a_dag_resumes_after_the_gateway_is_killed(start_gateway, tmp_path):
    gateway, dag, key, c_cluster, gate = killed_while_c_runs(start_gateway, tmp_path)
    gate.touch()  # C's node job ends while no gateway runs; wait until its launcher has recorded how
    wait_until(lambda: ExecuteDir.of(gateway.state_dir / "execute", c_cluster, 0).result() is not None)
    gateway.start()
    done = wait_for_dag(zeep_client(gateway.url + "condorSchedd.wsdl", gateway.url), key)
    assert done["ExitCode"] == "0" and done["NumJobStarts"] == "2"
    assert [runs(tmp_path, n) for n in "ABCD"] == [1, 1, 1, 1]  # C finished while down: recorded, not rerun
    assert "Resuming the DAG from its saved state" in dagman_out(dag)


def test_a_node_job_committed_just_before_a_crash_is_not_submitted_again(start_gateway, tmp_path):
    """The crash came between C's commit and the save of the DAG's state (what a loaded machine hit): the saved
    state has C queued with no cluster, made here by hand in the queue's SQLite file while no gateway runs."""
    gateway, dag, key, c_cluster, gate = killed_while_c_runs(start_gateway, tmp_path)
    state = saved_dag_state(gateway, key)
    assert state["C"]["cluster"] == c_cluster
    state["C"]["cluster"] = None
    store = sqlite3.connect(gateway.state_dir / "queue.sqlite3")
    with store:
        store.execute("UPDATE dag_state SET state = ? WHERE cluster = ?", (json.dumps(state), key[0]))
    store.close()
    gate.touch()
    gateway.start()
    done = wait_for_dag(zeep_client(gateway.url + "condorSchedd.wsdl", gateway.url), key)
    assert done["ExitCode"] == "0"
    assert [runs(tmp_path, n) for n in "ABCD"] == [1, 1, 1, 1]
    assert f"Node C was submitted as cluster {c_cluster} before the restart" in dagman_out(dag)


def test_an_unsupported_dag_command_fails_the_dag_with_a_clear_error(schedd, tmp_path):
    dag = write_dag(tmp_path, "JOB A A.sub\nSPLICE S other.dag\n", {"A": counted(tmp_path, "A")})
    done = wait_for_dag(schedd, submit_dag(schedd, dag))
    assert done["ExitCode"] == "1" and runs(tmp_path, "A") == 0
    assert "test.dag:2: unsupported DAG command 'SPLICE'" in dagman_out(dag)


def test_vars_dir_noop_and_categories(schedd, tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "V.sub").write_text(
        "executable = /bin/sh\narguments = \"-c 'echo $(greeting) $(other) $(JOB) > vars.out'\"\nqueue\n")
    dag = write_dag(tmp_path, 'JOB V V.sub DIR sub\nVARS V greeting="hello dag" other="x"\nJOB N none.sub NOOP\n'
                              "JOB X1 A.sub\nJOB X2 A.sub\nCATEGORY X1 cat\nCATEGORY X2 cat\nMAXJOBS cat 1\n"
                              "PARENT N CHILD V\n", {"A": f"{counted(tmp_path, 'A')}; sleep 0.2"})
    assert wait_for_dag(schedd, submit_dag(schedd, dag))["ExitCode"] == "0"
    assert (tmp_path / "sub" / "vars.out").read_text() == "hello dag x V\n"
    assert runs(tmp_path, "A") == 2 and "N" not in node_clusters(dag)


def test_maxjobs_runs_one_node_of_a_category_at_a_time(schedd, tmp_path):
    dag = write_dag(tmp_path, "JOB X1 A.sub\nJOB X2 A.sub\nJOB X3 A.sub\nCATEGORY X1 cat\nCATEGORY X2 cat\n"
                              "CATEGORY X3 cat\nMAXJOBS cat 1\n", {"A": f"{counted(tmp_path, 'A')}; sleep 0.2"})
    assert wait_for_dag(schedd, submit_dag(schedd, dag))["ExitCode"] == "0"
    log = [line.split(" ", 2)[2] for line in dagman_out(dag).splitlines()]
    submitted = [i for i, line in enumerate(log) if line.startswith("Submitted node X")]
    completed = [i for i, line in enumerate(log) if line.startswith("Node X") and "completed" in line]
    assert len(submitted) == 3 and all(completed[i] < submitted[i + 1] for i in range(2))


def test_maxpre_runs_one_pre_script_at_a_time(schedd, tmp_path):
    (tmp_path / "pre.sh").write_text(f"#!/bin/sh\necho start $(date +%s.%N) >> {tmp_path}/spans\nsleep 0.3\n"
                                     f"echo end $(date +%s.%N) >> {tmp_path}/spans\n")
    (tmp_path / "pre.sh").chmod(0o755)
    dag = write_dag(tmp_path, "JOB A A.sub\nJOB B A.sub\nJOB C A.sub\nSCRIPT PRE ALL_NODES pre.sh\n", {"A": "true"})
    key = submit_dag(schedd, dag, Arguments=f"-MaxPre 1 -Dag {dag}")
    assert wait_for_dag(schedd, key)["ExitCode"] == "0"
    events = sorted((float(stamp), 1 if kind == "start" else -1)
                    for kind, stamp in (line.split() for line in (tmp_path / "spans").read_text().splitlines()))
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    assert len(events) == 6 and peak == 1

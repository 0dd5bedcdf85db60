"""The QMF front end end to end: a real qpidd (``BIRDBATH_QPIDD``), a real gateway with ``[qmf]`` on, and the
console programs MRG's users ran, unchanged, on Python 2.7 with PyPI's ``qpid-qmf`` (``BIRDBATH_PYTHON2``): the
2009 blog's ``mrg.grid`` program and ``com.redhat.grid`` scripts.  Skipped, saying why, without a broker or a
Python 2.7."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from proton import Message

from gateway.testing import GatewayProcess
from gateway.testing_qpidd import QpidBroker, console_packages, missing_broker, python2, qpidd

#: its tests start gateway processes of their own (the mark: gateway.testing.GATEWAY_MARK)
pytestmark = pytest.mark.gateway

DATA = Path(__file__).parent / "data" / "qmf"
SEED_URL = "amqp://localhost:5672"


def qmf_config(broker: QpidBroker, extra: str = "", slots: int = 0) -> str:
    return (f'[birdbath]\ndefault_owner = "nobody"\n[qmf]\nenable_qmf = true\nqmf_broker_host = "127.0.0.1"\n'
            f"qmf_broker_port = {broker.port}\nqmf_update_interval = 2\n{extra}[backends.local]\nslots = {slots}\n")


def python2_console() -> tuple[str, Path]:
    """A Python 2.7 and the directory of PyPI's QMF console packages for it (skips the test without one)."""
    python = python2()
    if python is None:
        pytest.skip("no Python 2.7 for the QMF consoles: set BIRDBATH_PYTHON2 or put python2.7 on PATH")
    return python, console_packages(python)


@pytest.fixture(scope="session")
def console_python() -> tuple[str, Path]:
    return python2_console()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    if qpidd() is None:
        pytest.skip(missing_broker())
    started = QpidBroker(tmp_path_factory.mktemp("qpidd")).start()
    yield started
    started.stop()


def wait_ready(gateway: GatewayProcess, timeout: float = 60) -> None:
    """Until /readyz says the gateway (its QMF broker connection included) is ready."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(gateway.url + "readyz", timeout=5) as answer:
                if answer.status == 200:
                    return
        except OSError as exc:
            problem = getattr(exc, "read", lambda: b"")()
        if time.monotonic() > deadline:
            raise AssertionError(f"gateway not ready: {problem!r}")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def gateway(broker, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("qmf-gateway")
    process = GatewayProcess(tmp / "state", qmf_config(broker), tmp=tmp).start()
    wait_ready(process)
    yield process
    process.stop()


def console(console_python, script: Path | str, *args: str, timeout: float = 120,
            given: str | None = None) -> subprocess.CompletedProcess:
    python, packages = console_python
    return subprocess.run([python, str(script), *args], check=False, capture_output=True, text=True, timeout=timeout,
                          input=given, env={"PYTHONPATH": str(packages), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})


def calls(console_python, url: str, *made: tuple) -> list[dict]:
    """Method calls through one qmf.console session, each (package, class, method, arguments[, selectors]):
    ``{status, text, out}`` each (or ``{raised}``, ``{objects: 0}``)."""
    batch = [(*call, {}) if len(call) == 4 else call for call in made]
    done = console(console_python, DATA / "call.py", url, given=repr(batch))
    assert done.returncode == 0, done.stdout + done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def test_the_seeds_qmf_program_runs_unchanged(console_python, broker, gateway, tmp_path):
    program = (DATA / "seed_submit.py").read_text()
    assert program.count(SEED_URL) == 1
    copy = tmp_path / "seed_submit.py"
    copy.write_text(program.replace(SEED_URL, broker.url()))
    done = console(console_python, copy)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("Submitted job: ") and "#" in lines[0]
    job_id = lines[0].split(": ", 1)[1]
    assert lines[1] == "Job status: Idle"
    properties = dict(line.strip().split(" = ", 1) for line in lines[3:])
    assert properties["CustomId"] == job_id
    assert properties["Cmd"] == "/bin/sleep" and properties["Args"] == "120" and properties["Owner"] == "nobody"
    assert properties["JobStatus"] == "1"
    cluster = int(job_id.rsplit("#", 1)[1].split(".")[0])
    assert properties["ClusterId"] == str(cluster) and properties["ProcId"] == "0"


def test_a_com_redhat_grid_console_submits_edits_holds_and_removes(console_python, broker, gateway, tmp_path):
    done = console(console_python, DATA / "grid_console.py", broker.url(), str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("Submitted ") and "#" in lines[0]
    job = lines[0].rsplit("#", 1)[1]
    assert lines[1:] == [
        "Cmd /bin/sleep JobPrio 5 Requirements TRUE com.redhat.grid.Expression",
        "SetJobAttribute 0 hot sauce",
        "HoldJob 0",
        "Submission grid-console-demo nobody Held 1 Idle 0",
        "Summary 5 held by the console",
        "ReleaseJob 0",
        "RemoveJob 0",
        f"HoldJob again 65537 Failed to hold job: job {job} is not in the queue",
    ]


GRID = "com.redhat.grid"
USER = 0x10000
GOOD = {"Cmd": "/bin/true", "Requirements": "TRUE", "Iwd": "/tmp", "!!descriptors": {"Requirements": EXPRESSION}} \
    if (EXPRESSION := "com.redhat.grid.Expression") else {}


def scheduler(method: str, arguments) -> tuple:
    return (GRID, "scheduler", method, arguments)


#: (what, call, expected status, a text the answer holds)
HOSTILE = [
    ("an Ad that is not a map", scheduler("SubmitJob", ["not a map"]), 4, "must be a map"),
    ("an Ad without Cmd", scheduler("SubmitJob", [{"Requirements": "TRUE", "Iwd": "/tmp"}]), USER + 4, "Cmd"),
    ("a list as a value", scheduler("SubmitJob", [dict(GOOD, Args=[1, 2])]), USER + 6, "Args"),
    ("a map as a value", scheduler("SubmitJob", [dict(GOOD, Env={"A": "B"})]), USER + 6, "Env"),
    ("a huge map", scheduler("SubmitJob", [dict(GOOD, **{f"A{n}": n for n in range(5000)})]), USER + 6,
     "more than 2048"),
    ("a reserved word as a name", scheduler("SubmitJob", [dict(GOOD, true="x")]), USER + 3, "true"),
    ("an expression that does not parse", scheduler("SubmitJob", [dict(GOOD, Requirements="((")]), USER + 6,
     "Requirements"),
    ("descriptors that are not a map", scheduler("SubmitJob", [dict(GOOD, **{"!!descriptors": "x"})]), USER + 6,
     "!!descriptors"),
    ("root's job, anonymously", scheduler("SubmitJob", [dict(GOOD, Owner="root")]), USER + 1, "root"),
    ("an Id that is not one", scheduler("SetJobAttribute", ["abc", "Foo", "1"]), USER + 0, "Invalid Id"),
    ("an Id of the wrong type", scheduler("HoldJob", [5, "why"]), 4, "must be a string"),
    ("an unknown job", scheduler("HoldJob", ["99999.0", "why"]), USER + 1, "99999.0"),
    ("an unknown job's ad", scheduler("GetJobAd", ["99999.0"]), USER + 0, "99999.0"),
    ("an unknown job's data", scheduler("FetchJobData", ["99999.0", "Out", 0, 10]), 1, "99999.0"),
    ("a Start past int32", scheduler("FetchJobData", ["1.0", "Out", 1 << 40, 10]), 4, "Start"),
    ("a reserved attribute", scheduler("SetJobAttribute", ["1.0", "Owner", '"bob"']), USER + 2, "Owner"),
    ("the Submission", scheduler("SetJobAttribute", ["1.0", "submission", '"x"']), USER + 1, "submission"),
    ("a name that is not one", scheduler("SetJobAttribute", ["1.0", "bad name", "1"]), USER + 3, "bad name"),
    ("a value that does not parse", scheduler("SetJobAttribute", ["1.0", "Foo", "(("]), USER + 4, "Foo"),
    ("releasing an unknown job", scheduler("ReleaseJob", ["99999.0", "why"]), USER + 1, "99999.0"),
    ("removing a job by a bad id", scheduler("RemoveJob", ["1.x", "why"]), USER + 0, "Invalid Id"),
    ("suspending an unknown job", scheduler("SuspendJob", ["99999.0", "why"]), USER + 1, "99999.0"),
    ("continuing with a map as Reason", scheduler("ContinueJob", ["1.0", {"a": 1}]), 4, "Reason"),
    ("GetJobAd with a list as Id", scheduler("GetJobAd", [["1.0"]]), 4, "Id"),
    ("the jobserver's GetJobAd of a bad id", (GRID, "jobserver", "GetJobAd", ["0.0"]), USER + 0, "Invalid Id"),
    ("a file name that climbs out", scheduler("FetchJobData", ["1.0", "../../etc/passwd", 0, 10]), USER + 1,
     "not a plain file name"),
    ("an mrg.grid ad without TYPE", ("mrg.grid", "scheduler", "Submit", [{"Cmd": "/bin/true"}]), USER + 6, "TYPE"),
    ("an mrg.grid TYPE out of range", ("mrg.grid", "scheduler", "Submit", [{"Cmd": {"TYPE": 9, "VALUE": "x"}}]),
     USER + 6, "TYPE 9"),
]


def test_every_method_answers_hostile_input_with_qmfs_status_and_text(console_python, broker, gateway):
    """One job 1.0 of nobody's first (the seed's program may have made it; SubmitJob makes one either way)."""
    first = calls(console_python, broker.url(), scheduler("SubmitJob", [dict(GOOD, Owner="nobody")]))
    assert first[0]["status"] == 0, first
    answers = calls(console_python, broker.url(), *[call for _, call, _, _ in HOSTILE])
    assert len(answers) == len(HOSTILE)
    for (what, _, status, text), answer in zip(HOSTILE, answers, strict=True):
        assert answer.get("status") == status and text in answer.get("text", ""), (what, answer)
    # and the agent still answers
    assert calls(console_python, broker.url(), scheduler("echo", [7, "still here"]))[0]["out"] == \
        {"sequence": 7, "body": "still here"}


# -- the Python 3 path: birdbath_client.qmf over AMQP 1.0 -----------------------------------------------------------

def test_a_python3_console_sees_the_objects_and_calls_the_methods(broker, gateway):
    from birdbath_client.qmf import Console

    with Console(broker.url()) as console:
        (scheduler,) = console.objects(GRID, "scheduler")
        submitted = scheduler.call("SubmitJob", Ad=dict(GOOD, Submission="py3"))
        assert submitted.status == 0, submitted
        job = submitted.Id.rsplit("#", 1)[1]
        ad = scheduler.call("GetJobAd", Id=job).JobAd
        assert ad["Cmd"] == "/bin/true" and ad["!!descriptors"]["Requirements"] == EXPRESSION
        assert scheduler.call("HoldJob", Id=job, Reason="py3").status == 0
        (submission,) = [s for s in console.objects(GRID, "submission") if s.Name == "py3"]
        assert (submission.Held, submission.Idle, submission.Owner) == (1, 0, "nobody")
        submitters = {s.Name: s for s in console.objects(GRID, "submitter")}
        assert submitters["nobody"].HeldJobs >= 1
        assert scheduler.call("RemoveJob", Id=job, Reason="py3").status == 0


def test_requests_no_console_library_sends_are_answered_too(broker, gateway):
    """What qmf.console never sends (it checks against the schema first), a hand-made request may."""
    from birdbath_client.qmf import Console

    with Console(broker.url()) as console:
        agent = console.agent()
        scheduler = f"{GRID}:scheduler:{agent.split(':', 2)[2]}"
        extra = console.call(agent, scheduler, "HoldJob", {"Id": "1.0", "Reason": "x", "Extra": 1})
        assert (extra.status, extra.text) == (4, "HoldJob has no argument Extra")
        assert console.call(agent, scheduler, "HoldJob", {"Id": "1.0"}).status == 4
        assert console.call(agent, scheduler, "Nope", {}).status == 2
        assert console.call(agent, f"{GRID}:scheduler:elsewhere", "echo", {}).status == 1
        assert console.call(agent, "junk", "echo", {}).status == 1
        assert console.call(agent, f"{GRID}:submission:no-such-submission", "GetJobSummaries", {}).status == USER + 1
        for method, arguments, status in (("Hold", {"Reason": "x"}, USER + 1), ("Release", {"Reason": "x"}, USER + 1),
                                          ("Remove", {"Reason": "x"}, USER + 1), ("GetAd", {}, USER + 0),
                                          ("SetAttribute", {"Name": "A", "Value": "1"}, USER + 4),
                                          ("Fetch", {"File": "Out", "Start": 0, "End": 5}, 1),
                                          ("Fetch", {"File": "Out", "Start": "0", "End": 5}, 4)):
            answer = console.call(agent, "mrg.grid:job:99999.0", method, arguments)
            assert answer.status == status, (method, answer)
        assert console.call(agent, "mrg.grid:job:junk", "GetAd", {}).status == USER + 0
        # a request whose arguments are not a map, a garbage binary message, an unknown query
        assert console.call(agent, scheduler, "echo", ["not", "a", "map"]).status == 4  # type: ignore[arg-type]
        console._senders["qmf.default.direct"].send(Message(subject=agent, body=b"AM2S\x00", inferred=True))
        correlation = console._request("qmf.default.direct", agent, "_query_request", {"_what": "NOTHING"})
        answer = next(iter(console._answers(correlation)))
        assert answer.properties["qmf.opcode"] == "_exception"
        assert console.call(agent, scheduler, "echo", {"sequence": 1, "body": "alive"}).body == "alive"


def test_schema_and_schema_id_queries_are_answered_with_the_map_protocols_schemas(broker, gateway):
    from birdbath_client.qmf import DIRECT, Console

    with Console(broker.url()) as console:
        every = console.schemas()
        names = {(schema["_schema_id"]["_package_name"], schema["_schema_id"]["_class_name"]) for schema in every}
        assert {(GRID, "scheduler"), (GRID, "submission"), ("mrg.grid", "job")} <= names
        (scheduler,) = console.schemas(GRID, "Scheduler")  # (a class name matches whatever its case)
        properties = {prop["_name"]: prop for prop in scheduler["_properties"]}
        assert properties["Name"] == {"_name": "Name", "_type": "TYPE_STRING", "_access": "RO", "_index": True}
        assert properties["DaemonStartTime"]["_subtype"] == "timestamp"
        assert properties["TotalIdleJobs"]["_type"] == "TYPE_INT"
        submit = next(method for method in scheduler["_methods"] if method["_name"] == "SubmitJob")
        assert [(arg["_name"], arg["_type"], arg["_dir"]) for arg in submit["_arguments"]] == \
            [("Ad", "TYPE_MAP", "I"), ("Id", "TYPE_STRING", "O")]
        # the object query of the class the schema describes is answered with its properties
        (published,) = console.objects(GRID, "scheduler")
        assert set(published.values) <= set(properties)
        agent = console.agent()

        def query(body) -> tuple[str, object]:
            answer = next(iter(console._answers(console._request(DIRECT, agent, "_query_request", body))))
            return answer.properties.get("qmf.content") or answer.properties["qmf.opcode"], answer.body

        content, ids = query({"_what": "SCHEMA_ID", "_schema_id": {"_package_name": GRID, "_class_name": "submitter"}})
        assert content == "_schema_id" and len(ids) == 1
        assert ids == [schema["_schema_id"] for schema in every if schema["_schema_id"]["_class_name"] == "submitter"]
        # hostile: an unknown class, a class of another package, an id that is not a map, a name that is no string
        assert query({"_what": "SCHEMA", "_schema_id": {"_class_name": "nothing"}}) == ("_schema", [])
        assert query({"_what": "SCHEMA", "_schema_id": {"_package_name": "mrg.grid", "_class_name": "slot"}}) == \
            ("_schema", [])
        assert len(query({"_what": "SCHEMA", "_schema_id": "scheduler"})[1]) == len(every)
        assert len(query({"_what": "SCHEMA_ID", "_schema_id": {"_class_name": 7}})[1]) == len(every)


def test_the_daemons_the_gateway_does_not_run_answer_their_methods_with_qmfs_not_implemented(console_python, broker,
                                                                                                gateway):
    """The pool's master as the backend advertises it, its Start and Stop refused as the gateway cannot do them; a
    negotiator it does not know is no object (with HTCondor's pool it would be one, its methods refused alike:
    test_qmf_units.py)."""
    from birdbath_client.qmf import Console

    stop, bogus, negative = calls(console_python, broker.url(), (GRID, "master", "Stop", ["SCHEDD"]),
                                  (GRID, "master", "Start", ["BOGUS"]), (GRID, "master", "Stop", [7]))
    assert stop["status"] == 3 and "does not start or stop" in stop["text"], stop
    assert bogus["status"] == 4 and "Subsystem must be one of" in bogus["text"], bogus
    assert negative["status"] == 4 and "must be a string" in negative["text"], negative
    with Console(broker.url()) as console:
        (master,) = console.objects(GRID, "master")
        assert master.Name and master.CondorVersion
        agent = console.agent()
        assert console.call(agent, f"{GRID}:master:{master.Name}", "Stop", {"Subsystem": "SCHEDD"}).status == 3
        assert console.call(agent, f"{GRID}:master:no-such-master", "Stop", {"Subsystem": "SCHEDD"}).status == 1
        assert console.objects(GRID, "negotiator") == []
        unknown = console.call(agent, f"{GRID}:negotiator:{master.Name}", "Reconfig", {})
        assert (unknown.status, unknown.text) == (1, f"the pool has no negotiator {master.Name!r}")
        (schema,) = console.schemas(GRID, "negotiator")
        assert {method["_name"] for method in schema["_methods"]} >= {"GetLimits", "SetPriority", "Reconfig"}


def test_a_console_that_receives_objects_is_told_the_schedulers_counts_as_they_change(console_python, broker,
                                                                                       gateway):
    """qmf.console's objectProps, fed by the data indications the agent publishes every qmf_update_interval."""
    from birdbath_client.qmf import Console

    python, packages = console_python
    watcher = subprocess.Popen([python, str(DATA / "watch.py"), broker.url(), "90"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True,
                               env={"PYTHONPATH": str(packages), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
    try:
        assert watcher.stdout.readline() == "ready\n", watcher.stderr.read()
        with Console(broker.url()) as console:
            (scheduler,) = console.objects(GRID, "scheduler")
            assert scheduler.call("SubmitJob", Ad=dict(GOOD, Submission="watched")).status == 0
            first = watcher.stdout.readline()  # (told unasked, within an interval of the change)
            assert first == f"scheduler {scheduler.TotalJobAds + 1}\n", first + watcher.stderr.read()
            assert scheduler.call("SubmitJob", Ad=dict(GOOD, Submission="watched")).status == 0
            told = watcher.stdout.readline()
            assert told == f"scheduler {scheduler.TotalJobAds + 2}\n", told + watcher.stderr.read()
    finally:
        watcher.kill()
        watcher.communicate()


# -- who the caller is: the broker's login ------------------------------------------------------------------------
# The qpidd the tests run is built without Cyrus SASL, so it cannot authenticate (``--auth yes`` refuses to start)
# and passes a message's user_id unchecked: what is tested here is the agent's side, that a user_id is the identity
# when qmf_broker_auth_mech says the broker authenticates (PLAIN) and is ignored when it does not (ANONYMOUS).

@pytest.fixture(scope="module")
def plain_gateway(broker, tmp_path_factory):
    """A second gateway on the same broker that logs in with PLAIN (its agent has its own name: schedd "plain")."""
    tmp = tmp_path_factory.mktemp("qmf-plain-gateway")
    (tmp / "broker-password").write_text("gateway-secret\n")
    extra = (f'qmf_broker_auth_mech = "PLAIN"\nqmf_broker_username = "gateway"\n'
             f'qmf_broker_password_file = "{tmp / "broker-password"}"\n')
    config = qmf_config(broker, extra).replace("slots = 0\n", 'slots = 0\nschedd_name = "plain"\n')
    process = GatewayProcess(tmp / "state", config, tmp=tmp).start()
    wait_ready(process)
    yield process
    process.stop()


def agent_of(console, schedd: str) -> str:
    """The agent of the gateway whose schedd is ``schedd`` (two gateways share the broker here)."""
    for _ in range(20):
        name = console.agent()
        if name.endswith(f":{schedd}"):
            return name
    raise AssertionError(f"no agent for schedd {schedd}")


def test_a_console_login_is_its_identity_when_the_broker_authenticates(broker, plain_gateway, console_python):
    from birdbath_client.qmf import Console

    with Console(broker.url(), "alice", "alice-secret") as alice:
        (scheduler,) = alice.objects(GRID, "scheduler", agent_of(alice, "plain"))
        mine = scheduler.call("SubmitJob", Ad=GOOD)
        assert mine.status == 0, mine
        job = mine.Id.rsplit("#", 1)[1]
        assert scheduler.call("GetJobAd", Id=job).JobAd["Owner"] == "alice"
        refused = scheduler.call("SubmitJob", Ad=dict(GOOD, Owner="bob"))
        assert refused.status == USER + 1 and "bob" in refused.text
    with Console(broker.url(), "bob", "bob-secret") as bob:
        (scheduler,) = bob.objects(GRID, "scheduler", agent_of(bob, "plain"))
        held = scheduler.call("HoldJob", Id=job, Reason="not mine")
        assert held.status == USER + 1 and "Not job owner" in held.text
        edited = scheduler.call("SetJobAttribute", Id=job, Name="Foo", Value="1")
        assert edited.status == USER + 4 and "Not job owner" in edited.text
    # qmf.console on Python 2 logs in the same way (amqp://user/password@host:port) and sends its user_id
    answers = calls(console_python, broker.url("bob", "bob-secret"),
                    (GRID, "scheduler", "HoldJob", [job, "python 2"], {"Name": "plain"}),
                    (GRID, "scheduler", "SubmitJob", [GOOD], {"Name": "plain"}))
    assert answers[0]["status"] == USER + 1 and "Not job owner" in answers[0]["text"], answers
    assert answers[1]["status"] == 0, answers
    with Console(broker.url(), "alice", "alice-secret") as alice:
        (scheduler,) = alice.objects(GRID, "scheduler", agent_of(alice, "plain"))
        bobs = answers[1]["out"]["Id"].rsplit("#", 1)[1]
        assert scheduler.call("GetJobAd", Id=bobs).JobAd["Owner"] == "bob"
        assert scheduler.call("HoldJob", Id=job, Reason="mine").status == 0


def test_a_user_id_is_ignored_when_the_broker_does_not_authenticate(broker, gateway):
    """The default ANONYMOUS: every console is anonymous (default_owner), whatever user_id it puts on a message."""
    from birdbath_client.qmf import Console

    with Console(broker.url(), "alice", "alice-secret") as alice:
        (scheduler,) = alice.objects(GRID, "scheduler", agent_of(alice, "localhost"))
        submitted = scheduler.call("SubmitJob", Ad=GOOD)
        assert submitted.status == 0, submitted
        assert scheduler.call("GetJobAd", Id=submitted.Id.rsplit("#", 1)[1]).JobAd["Owner"] == "nobody"
        refused = scheduler.call("SubmitJob", Ad=dict(GOOD, Owner="alice"))
        assert refused.status == USER + 1 and "anonymous" in refused.text


# -- the broker and the gateway going away -------------------------------------------------------------------------

#: seconds a gateway's answer may take: one just started, among a loaded suite's, took more than 5 (workers = 2)
ANSWER_TIMEOUT = 30


def readyz(gateway: GatewayProcess) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(gateway.url + "readyz", timeout=ANSWER_TIMEOUT) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def metric(gateway: GatewayProcess, name: str) -> float:
    with urllib.request.urlopen(gateway.url + "metrics", timeout=ANSWER_TIMEOUT) as answer:
        for line in answer.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    raise AssertionError(f"no metric {name}")


def until(predicate, what: str, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"not {what} within {timeout} s")
        time.sleep(0.2)
    return value


@contextlib.contextmanager
def broker_and_gateway(directory: Path, slots: int = 0):
    """A broker and a gateway of a test's own (it stops or kills one of them, or runs jobs)."""
    if qpidd() is None:
        pytest.skip(missing_broker())
    broker = QpidBroker(directory / "qpidd").start()
    gateway = GatewayProcess(directory / "state", qmf_config(broker, slots=slots), tmp=directory).start()
    try:
        wait_ready(gateway)
        yield broker, gateway
    finally:
        gateway.stop()
        broker.stop()


@pytest.fixture
def own(tmp_path):
    with broker_and_gateway(tmp_path) as pair:
        yield pair


def test_the_agent_comes_back_when_the_broker_restarts(own, tmp_path, console_python):
    from birdbath_client.qmf import Console

    broker, gateway = own
    assert metric(gateway, "birdbath_qmf_connected") == 1
    assert metric(gateway, "birdbath_qmf_connections_total") == 1
    broker.stop()
    _, body = until(lambda: (answer := readyz(gateway))[0] == 503 and answer, "unready")
    assert "QMF broker not connected" in json.dumps(body)
    assert metric(gateway, "birdbath_qmf_connected") == 0
    broker.start()
    wait_ready(gateway)
    assert metric(gateway, "birdbath_qmf_connections_total") == 2
    with Console(broker.url()) as python3:
        (scheduler,) = python3.objects(GRID, "scheduler")
        assert scheduler.call("SubmitJob", Ad=GOOD).status == 0
    # at once this time: the agent may reconnect while the broker is still starting, and attach again when it can
    broker.restart()
    until(lambda: metric(gateway, "birdbath_qmf_connections_total") == 3, "reconnected")
    wait_ready(gateway)
    program = (DATA / "seed_submit.py").read_text().replace(SEED_URL, broker.url())
    (tmp_path / "seed.py").write_text(program)
    done = console(console_python, tmp_path / "seed.py")
    assert done.returncode == 0 and "Job status: Idle" in done.stdout, done.stdout + done.stderr


def test_the_agent_is_ready_once_its_receivers_are_attached_and_attaches_again_when_it_can(tmp_path, console_python):
    """A broker without management has no QMF exchanges: the broker refuses the agent's receivers, /readyz says so,
    and once the exchanges are there the agent attaches again by itself and answers."""
    if qpidd() is None:
        pytest.skip(missing_broker())
    from birdbath_client.qmf import Console

    broker = QpidBroker(tmp_path / "qpidd", options=("--mgmt-enable", "no")).start()
    gateway = GatewayProcess(tmp_path / "state", qmf_config(broker), tmp=tmp_path).start()
    try:
        until(lambda: metric(gateway, "birdbath_qmf_connections_total") == 1, "connected")
        status, body = readyz(gateway)
        assert status == 503 and "QMF broker not connected" in json.dumps(body)
        assert "Node not found" in until(lambda: "link" in gateway.log() and gateway.log(), "a refused link")
        declared = console(console_python, DATA / "declare_exchanges.py", str(broker.port))
        assert declared.returncode == 0, declared.stderr
        wait_ready(gateway)
        assert metric(gateway, "birdbath_qmf_connections_total") == 1  # the same connection, its links made again
        with Console(broker.url()) as python3:
            (scheduler,) = python3.objects(GRID, "scheduler")
            assert scheduler.call("echo", sequence=3, body="attached").body == "attached"
    finally:
        gateway.stop()
        broker.stop()


def test_a_gateway_killed_with_calls_in_flight_leaves_whole_jobs_and_answers_again(own):
    from birdbath_client.qmf import Console, QmfTimeout

    broker, gateway = own
    with Console(broker.url(), timeout=5) as console:
        agent = console.agent()
        scheduler = f"{GRID}:scheduler:{agent.split(':', 2)[2]}"
        for n in range(30):
            console._request("qmf.default.direct", agent, "_method_request", {
                "_object_id": {"_object_name": scheduler}, "_method_name": "SubmitJob",
                "_arguments": {"Ad": dict(GOOD, Submission="in-flight", Number=n)}})
        gateway.kill()
        answered = []
        with pytest.raises(QmfTimeout):  # the answers stop with the gateway
            for message in console._answers(None):
                answered.append(message.body["_arguments"]["Id"])
    gateway.start()
    wait_ready(gateway)
    with Console(broker.url()) as console:
        (scheduler_object,) = console.objects(GRID, "scheduler")
        submissions = [s for s in console.objects(GRID, "submission") if s.Name == "in-flight"]
        jobs = submissions[0].call("GetJobSummaries").Jobs if submissions else []
        # every job answered is there, whole; none is there half made
        ids = {f"{job['ClusterId']}.{job['ProcId']}" for job in jobs}
        assert {answer.rsplit("#", 1)[1] for answer in answered} <= ids
        for job in jobs:
            ad = scheduler_object.call("GetJobAd", Id=f"{job['ClusterId']}.{job['ProcId']}").JobAd
            assert ad["Cmd"] == "/bin/true" and ad["Submission"] == "in-flight" and "Number" in ad
        assert scheduler_object.call("SubmitJob", Ad=GOOD).status == 0


# -- jobs that run: a DAG, and their output ----------------------------------------------------------------------

@pytest.fixture
def world_writable(traversable):
    """A directory the jobs (which run as nobody) can write, under /tmp (pytest's own are root's alone)."""
    traversable.chmod(0o777)
    return traversable


def test_a_dag_submitted_as_mrg_scripts_did_runs_and_its_output_is_fetched(tmp_path, world_writable, console_python):
    from birdbath_client.qmf import Console

    for node in "AB":
        (world_writable / f"{node}.sub").write_text(
            f"universe = vanilla\nexecutable = /bin/echo\narguments = node {node}\noutput = {node}.out\n"
            f"error = {node}.err\nlog = nodes.log\nqueue\n")
    (world_writable / "pair.dag").write_text("JOB A A.sub\nJOB B B.sub\nPARENT A CHILD B\n")
    with broker_and_gateway(tmp_path, slots=2) as (broker, _):
        done = console(console_python, DATA / "grid_dag.py", broker.url(), str(world_writable), "pair.dag")
        assert done.returncode == 0, done.stdout + done.stderr
        lines = done.stdout.splitlines()
        # the nodes belong to their DAG's submission, as in HTCondor
        assert lines[1:] == ["DAG JobStatus 4 ExitCode 0", "Submission my-dag Completed 3"], lines
        assert (world_writable / "B.out").read_text() == "node B\n"
        with Console(broker.url()) as python3:
            (scheduler,) = python3.objects(GRID, "scheduler")
            submitted = scheduler.call("SubmitJob", Ad=dict(GOOD, Cmd="/bin/echo", Args="hello qmf",
                                                            Iwd=str(world_writable), Out="hello.out"))
            job = submitted.Id.rsplit("#", 1)[1]
            until(lambda: scheduler.call("GetJobAd", Id=job).JobAd["JobStatus"] == 4, "completed")
            assert scheduler.call("FetchJobData", Id=job, File="Out", Start=0, End=100).Data == "hello qmf\n"
            assert scheduler.call("FetchJobData", Id=job, File="Out", Start=-4, End=0).Data == "qmf\n"
            refused = scheduler.call("FetchJobData", Id=job, File="Out", Start=5, End=2)
            assert refused.status == USER + 10
            outside = scheduler.call("FetchJobData", Id=job, File="/etc/passwd", Start=0, End=100)
            assert outside.status == USER + 1, outside
            # the pool as the gateway knows it
            (slot,) = python3.objects(GRID, "slot")
            assert slot.Cpus == 2 and slot.SlotType == "Partitionable" and slot.OpSys and slot.Requirements
            (collector,) = python3.objects(GRID, "collector")
            assert collector.HostsTotal == 1 and collector.CondorVersion == scheduler.CondorVersion
            assert len(python3.objects(GRID, "master")) == 1 and python3.objects(GRID, "negotiator") == []

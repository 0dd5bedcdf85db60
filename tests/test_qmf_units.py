"""The QMF front end's parts without a broker: the ``[qmf]`` knobs, QMFv1's schema request, the ads' two encodings
and the checks of a method call's arguments (the end-to-end tests are in test_qmf.py)."""

from __future__ import annotations

import struct
import uuid

import pytest

from gateway.config import ConfigError, load
from gateway.core.adstruct import Attr, AttrType
from gateway.qmf import ads, wire
from gateway.qmf.methods import QmfError, Status, checked_arguments
from gateway.qmf.schema import CLASSES, SCHEDULER, class_by_key, find_class


def config(tmp_path, text: str):
    path = tmp_path / "gateway.toml"
    path.write_text(text)
    return load(path)


def test_qmf_knobs_and_their_defaults(tmp_path):
    (tmp_path / "password").write_text("s3cret\nignored\n")
    settings = config(tmp_path, f'[qmf]\nenable_qmf = true\nqmf_broker_auth_mech = "plain"\nqmf_broker_username = '
                                f'"gw"\nqmf_broker_password_file = "{tmp_path / "password"}"\n').sections["qmf"]
    assert settings.enable_qmf and settings.qmf_broker_auth_mech == "PLAIN" and settings.authenticated
    assert settings.password() == "s3cret" and settings.qmf_broker_port == 5672
    defaults = config(tmp_path, "").sections["qmf"]
    assert not defaults.enable_qmf and not defaults.authenticated and defaults.qmf_update_interval == 10


@pytest.mark.parametrize("text, words", [
    ("qmf_no_such = 1", "unknown setting in \\[qmf\\]"),
    ('qmf_broker_port = "5672"', "expected int"),
    ("qmf_update_interval = 0", "at least 1"),
    ('qmf_broker_auth_mech = "GSSAPI"', "ANONYMOUS, PLAIN"),
    ('qmf_broker_auth_mech = "PLAIN"', "needs qmf_broker_username and qmf_broker_password_file"),
    ('qmf_broker_auth_mech = "PLAIN"\nqmf_broker_username = "gw"\nqmf_broker_password_file = "/nonexistent"',
     "qmf_broker_password_file cannot be read"),
])
def test_bad_qmf_knobs_are_refused(tmp_path, text, words):
    with pytest.raises(ConfigError, match=words):
        config(tmp_path, f"[qmf]\n{text}\n")


def schema_request(package: bytes, name: bytes, hash_: bytes, sequence: int = 7) -> bytes:
    return (b"AM2S" + struct.pack("!I", sequence) + bytes([len(package)]) + package + bytes([len(name)]) + name
            + hash_)


def test_a_schema_request_names_a_class_and_is_answered_in_qmfv1s_encoding():
    key = SCHEDULER.key
    sequence, asked = wire.schema_request(schema_request(key.package.encode(), key.name.encode(), key.hash.bytes))
    assert sequence == 7 and class_by_key(asked) is SCHEDULER
    answer = wire.schema_response(sequence, key, *SCHEDULER.v1_descriptions())
    assert answer.startswith(b"AM2s" + struct.pack("!I", 7) + b"\x01")
    counts = answer[8 + 1 + 1 + len(key.package) + 1 + len(key.name) + 16:][:6]
    assert struct.unpack("!HHH", counts) == (len(SCHEDULER.properties), len(SCHEDULER.statistics),
                                             len(SCHEDULER.methods))


@pytest.mark.parametrize("data", [b"", b"AM2", b"AM2S\x00\x00", b"AM2X" + b"\x00" * 40,
                                  schema_request(b"\xff\xfe", b"x", b"\x00" * 16),
                                  schema_request(b"com.redhat.grid", b"scheduler", b"\x00" * 8)])
def test_a_binary_message_that_is_not_a_schema_request_is_refused(data):
    with pytest.raises(wire.BadMessage):
        wire.schema_request(data)


def test_a_class_with_another_hash_is_not_ours():
    key = SCHEDULER.key
    assert class_by_key(wire.ClassKey(key.package, key.name, uuid.uuid4())) is None
    assert len({c.hash for c in CLASSES}) == len(CLASSES)
    assert find_class(None, "Scheduler") == [c for c in CLASSES if c.name == "scheduler"]


def test_com_redhat_grid_ads_in_and_out():
    attrs = ads.from_grid({"Cmd": "/bin/true", "N": 3, "F": 1.5, "B": True, "Requirements": "TRUE",
                           "U": uuid.UUID(int=1), "T": b"caf\xc3\xa9",
                           "!!descriptors": {"Requirements": ads.EXPRESSION}})
    assert {a.name: (a.type, a.value) for a in attrs} == {
        "Cmd": (AttrType.STRING, "/bin/true"), "N": (AttrType.INTEGER, "3"), "F": (AttrType.FLOAT, "1.5"),
        "B": (AttrType.BOOLEAN, "TRUE"), "Requirements": (AttrType.EXPRESSION, "TRUE"),
        "U": (AttrType.STRING, str(uuid.UUID(int=1))), "T": (AttrType.STRING, "café")}
    out = ads.to_grid([Attr("N", AttrType.INTEGER, "3"), Attr("S", AttrType.STRING, '"quoted"'),
                       Attr("E", AttrType.EXPRESSION, "N + 1"), Attr("B", AttrType.BOOLEAN, "TRUE")])
    assert out == {"N": 3, "S": '"quoted"', "E": "N + 1", "B": "TRUE",
                   "!!descriptors": {"E": ads.EXPRESSION, "B": ads.EXPRESSION}}
    assert ads.to_typed([Attr("N", AttrType.INTEGER, "3"), Attr("B", AttrType.BOOLEAN, "TRUE")]) == \
        {"N": {"TYPE": 1, "VALUE": "3"}, "B": {"TYPE": 0, "VALUE": "TRUE"}}


@pytest.mark.parametrize("ad, words", [
    ("text", "must be a map"),
    ({1: "x"}, "names must be text"),
    ({"A": b"\xff"}, "not UTF-8"),
    ({"A": None}, "expected text"),
    ({f"A{n}": n for n in range(ads.MAX_ATTRIBUTES + 1)}, "more than"),
    ({"A": 1, "!!descriptors": ["A"]}, "!!descriptors must be a map"),
])
def test_hostile_com_redhat_grid_ads_are_refused(ad, words):
    with pytest.raises(ads.BadAd, match=words):
        ads.from_grid(ad)


@pytest.mark.parametrize("ad, words", [
    ({"A": "x"}, "expected"),
    ({"A": {"TYPE": True, "VALUE": "1"}}, "TYPE True"),
    ({"A": {"TYPE": 4, "VALUE": "1"}}, "TYPE 4"),
    ({"A": {"TYPE": 3}}, "expected"),
    ({"A": {"TYPE": 3, "VALUE": ["x"]}}, "expected text"),
])
def test_hostile_mrg_grid_ads_are_refused(ad, words):
    with pytest.raises(ads.BadAd, match=words):
        ads.from_typed(ad)


def test_mrg_grid_numbers_may_come_as_numbers():
    assert ads.from_typed({"N": {"TYPE": 1, "VALUE": 5}}) == [Attr("N", AttrType.INTEGER, "5")]


@pytest.mark.parametrize("given, words", [
    ({"Id": "1.0"}, "Reason is missing"),
    ({"Id": 1, "Reason": "x"}, "Id must be a string"),
    ({"Id": "1.0", "Reason": "x", "More": 1}, "no argument More"),
    (["1.0", "x"], "must be a map"),
])
def test_a_calls_arguments_are_checked_against_the_schema(given, words):
    with pytest.raises(QmfError, match=words) as raised:
        checked_arguments(SCHEDULER.method("HoldJob"), given)
    assert raised.value.code == Status.PARAMETER_INVALID


def test_integer_arguments_keep_to_their_range():
    fetch = SCHEDULER.method("FetchJobData")
    good = {"Id": "1.0", "File": "Out", "Start": -(1 << 31), "End": (1 << 31) - 1}
    assert checked_arguments(fetch, good) == good
    for bad in (1 << 31, True, 1.5, "3"):
        with pytest.raises(QmfError, match="Start must be an integer"):
            checked_arguments(fetch, {**good, "Start": bad})


def objects(publish_submissions: bool, has_pool: bool):
    from types import SimpleNamespace

    from gateway.qmf.objects import Objects

    submissions = SimpleNamespace(settings=SimpleNamespace(schedd_name="schedd.example", pool_name="pool"))
    collector = SimpleNamespace(has_pool=has_pool, backend_info=SimpleNamespace(version="v", platform="p"))
    return Objects(submissions, collector, "com.redhat.grid:scheduler:schedd.example", 0.0,  # type: ignore[arg-type]
                   publish_submissions)


def test_what_is_published_follows_qmf_publish_submissions_and_the_pool():
    from gateway.qmf.schema import JOBSERVER, MRG_JOB, SLOT, SUBMISSION

    everything = objects(True, True)
    assert {SUBMISSION, JOBSERVER, SLOT, MRG_JOB} <= set(everything.classes())
    assert everything.exists(JOBSERVER, "jobs@schedd.example") and not everything.exists(JOBSERVER, "jobs@other")
    assert everything.exists(SCHEDULER, "schedd.example") and not everything.exists(SCHEDULER, "other")
    fewer = objects(False, False)
    assert not {SUBMISSION, JOBSERVER, SLOT} & set(fewer.classes()) and MRG_JOB in fewer.classes()
    assert not fewer.exists(SUBMISSION, "any") and not fewer.exists(JOBSERVER, "jobs@schedd.example")


def test_object_names_name_their_class_and_key():
    from gateway.qmf.objects import object_name, parse_name

    assert parse_name(object_name(SCHEDULER, "a:b#c")) == (SCHEDULER, "a:b#c")
    for junk in ("", "com.redhat.grid", "com.redhat.grid:scheduler", "com.redhat.grid:scheduler:", "x:y:z"):
        assert parse_name(junk) is None


def test_the_link_connects_again_when_the_broker_closes_it_with_an_error():
    """An AMQP 1.0 peer (proton, on loopback) that closes the agent's first connection as an administrator would
    (qpidd's own close of a 1.0 connection does nothing): the link connects again (some 20 s later, measured
    here; why it waits that long is not known)."""
    import socket
    import threading
    import time

    from proton import Condition
    from proton.handlers import MessagingHandler
    from proton.reactor import Container

    from gateway.qmf.link import BrokerAddress, BrokerLink

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    class Peer(MessagingHandler):
        opened = 0

        def on_start(self, event):
            event.container.listen(f"127.0.0.1:{port}")

        def on_connection_opened(self, event):
            Peer.opened += 1
            if Peer.opened == 1:
                event.connection.condition = Condition("amqp:connection:forced", "closed by an administrator")
                event.connection.close()

    peer = Container(Peer())
    threading.Thread(target=peer.run, daemon=True).start()
    changes: list[bool] = []
    link = BrokerLink(BrokerAddress("127.0.0.1", port, "ANONYMOUS", None, None), "com.redhat.grid:scheduler:x",
                      lambda message: None, changes.append)
    link.start()
    try:
        deadline = time.monotonic() + 30
        while link.connections < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert link.connections == 2 and Peer.opened == 2
    finally:
        link.stop()
        peer.stop()


def test_every_class_has_a_map_protocol_schema_that_says_what_its_qmfv1_one_says():
    for klass in CLASSES:
        schema = klass.v2_schema()
        assert schema["_schema_id"] == klass.schema_id()
        assert [prop["_name"] for prop in schema["_properties"]] == \
            [prop.name for prop in (*klass.properties, *klass.statistics)]
        assert all(prop["_type"].startswith("TYPE_") and prop["_access"] == "RO" for prop in schema["_properties"])
        for method, described in zip(klass.methods, schema["_methods"], strict=True):
            assert described["_name"] == method.name
            assert [(arg["_name"], arg["_dir"]) for arg in described["_arguments"]] == \
                [(arg.name, arg.dir.value) for arg in method.args]
    assert SCHEDULER.v2_schema()["_properties"][0]["_type"] == "TYPE_STRING"


@pytest.mark.parametrize("klass, method, arguments, status, words", [
    ("negotiator", "Reconfig", {}, 3, "does not run the pool's negotiator"),
    ("negotiator", "SetPriority", {"Name": "alice@here", "Priority": 2}, 3, "does not run the pool's negotiator"),
    ("negotiator", "SetPriority", {"Name": "alice@here", "Priority": "high"}, 4, "must be a number"),
    ("negotiator", "SetUsage", {"Name": "alice@here", "Usage": True}, 4, "must be a number"),
    ("negotiator", "GetLimits", {"Limits": {}}, 4, "has no argument Limits"),
    ("master", "Start", {"Subsystem": "STARTD"}, 3, "does not start or stop"),
    ("master", "Stop", {"Subsystem": "schedd"}, 4, "Subsystem must be one of"),
    ("master", "Stop", {}, 4, "argument Subsystem is missing")])
def test_the_negotiators_and_masters_methods_are_refused_as_the_gateway_cannot_do_them(tmp_path, klass, method,
                                                                                       arguments, status, words):
    from gateway.core.auth import Caller
    from gateway.qmf.methods import Call, Methods
    from tests.qmf_queue import ManyJobs
    from tests.synchronous import run

    (found,) = find_class("com.redhat.grid", klass)
    queue = ManyJobs(tmp_path, 1, 1)
    try:
        with pytest.raises(QmfError) as refused:
            schema_method = found.method(method)
            assert schema_method is not None
            call = Call(Caller("127.0.0.1"), found, "pool-daemon", schema_method,
                        checked_arguments(schema_method, arguments))
            run(Methods(queue.schedd, queue.submissions).run(call))
        assert refused.value.code == status and words in refused.value.text, refused.value.text
    finally:
        queue.close()

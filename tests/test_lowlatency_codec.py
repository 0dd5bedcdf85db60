"""The low-latency front end's pure parts, without a broker: reply_to forms, headers to job attributes and back,
input zips, and the ``[carod]`` knobs."""

from __future__ import annotations

import decimal
import io
import zipfile

import classad2
import pytest

from gateway.config import ConfigError, load
from gateway.core.adstruct import AttrType
from gateway.lowlatency.archive import MAX_ENTRIES, input_files, results_zip
from gateway.lowlatency.codec import BadMessage, ReplyAddress, job_message, reply_address, reply_headers


@pytest.mark.parametrize("text, address", [
    ("amq.direct/my_grid_results_key", ReplyAddress("amq.direct", "my_grid_results_key")),
    ("/exchange/amq.direct/key", ReplyAddress("amq.direct", "key")),
    ("/exchange/amq.topic/a.b.*", ReplyAddress("amq.topic", "a.b.*")),
    ("/queue/results", ReplyAddress("", "results")),
    ("results", ReplyAddress("", "results")),
])
def test_reply_to_forms(text, address):
    assert reply_address(text) == address


@pytest.mark.parametrize("text", [None, "", "a/b/c", "/exchange/x", "/queue/", "/queue/a/b", "has space", "x/has space",
                                  "/other/a/b", "a" * 300])
def test_unusable_reply_to_is_refused(text):
    with pytest.raises(BadMessage, match="reply_to"):
        reply_address(text)


def test_headers_become_typed_attributes_with_carods_defaults():
    message = job_message({"Cmd": '"/bin/echo"', "Arguments": b'"hi"', "RequestCpus": 1, "NiceUser": False,
                           "Rank": decimal.Decimal("1.5"), "x-death": [1], "ClusterId": 99, "Iwd": '"/etc"',
                           "AMQPID": '"forged"', "Owner": '"bob"'})
    by_name = {attr.name: attr for attr in message.attributes}
    assert by_name["Cmd"].type is AttrType.EXPRESSION and by_name["Arguments"].value == '"hi"'
    assert (by_name["RequestCpus"].type, by_name["RequestCpus"].value) == (AttrType.INTEGER, "1")
    assert (by_name["NiceUser"].type, by_name["NiceUser"].value) == (AttrType.BOOLEAN, "false")
    assert by_name["Rank"].type is AttrType.FLOAT
    assert by_name["JobUniverse"].value == "5" and by_name["Requirements"].value == "TRUE"
    assert not {"x-death", "ClusterId", "Iwd", "AMQPID", "Owner"} & set(by_name)
    assert message.owner == "bob"


@pytest.mark.parametrize("headers, words", [
    ({}, "no Cmd"),
    (None, "no Cmd"),
    ({"Cmd": {"nested": 1}}, "AMQP dict"),
    ({"Cmd": ["a"]}, "AMQP list"),
    ({"Cmd": None}, "AMQP void"),
    ({"Cmd": b"\xff\xfe"}, "not UTF-8"),
    ({"Cmd": '"/bin/true"', "Owner": 7}, "Owner header must be text"),
])
def test_bad_headers_are_refused_with_a_reason(headers, words):
    with pytest.raises(BadMessage, match=words):
        job_message(headers)


def test_reply_headers_carry_integers_as_integers_and_the_rest_as_classad_text():
    ad = classad2.ClassAd({"JobStatus": 4, "ExitCode": 0, "Cmd": "/bin/echo", "RemoteUserCpu": 0.5,
                           "ExitBySignal": False})
    ad["Requirements"] = classad2.ExprTree("TRUE")
    headers = reply_headers(ad, 0, JobState='"Exited"')
    assert headers["JobStatus"] == 4 and headers["ExitCode"] == 0
    assert headers["Cmd"] == '"/bin/echo"' and headers["JobState"] == '"Exited"'
    assert isinstance(headers["RemoteUserCpu"], str) and headers["ExitBySignal"] in ("FALSE", "false")
    assert all(not isinstance(value, float) for value in headers.values())  # pika cannot encode floats


def zip_of(*entries: tuple[str, bytes], info: zipfile.ZipInfo | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries:
            archive.writestr(name, data)
        if info is not None:
            archive.writestr(info, b"x")
    return buffer.getvalue()


def test_a_plain_input_zip_unpacks():
    files = input_files(zip_of(("a.txt", b"one"), ("run.sh", b"echo hi\n")), 1000)
    assert [(f.name, f.data) for f in files] == [("a.txt", b"one"), ("run.sh", b"echo hi\n")]
    assert input_files(b"", 10) == []


def unix_entry(name: str, mode: int) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.create_system = 3
    info.external_attr = mode << 16
    return info


@pytest.mark.filterwarnings("ignore:Duplicate name")  # the zip made with a name twice, on purpose
@pytest.mark.parametrize("body, words", [
    (b"PK\x03\x04 not really", "not a zip"),
    (zip_of(("/etc/passwd", b"x")), "absolute"),
    (zip_of(("C:evil", b"x")), "absolute"),
    (zip_of(("../up", b"x")), "leaves the job's directory"),
    (zip_of(("a/../../up", b"x")), "leaves the job's directory"),
    (zip_of(("dir/a", b"x")), "directory"),
    (zip_of(info=unix_entry("dir/", 0o040755)), "directory"),
    (zip_of(info=unix_entry("link", 0o120777)), "symbolic link"),
    (zip_of(info=unix_entry("fifo", 0o010644)), "not a regular file"),
    (zip_of(("a,b", b"x")), "comma"),
    (zip_of(("twice", b"x"), ("twice", b"y")), "twice"),
    (zip_of(("bomb", b"\0" * 200_000)), "more than carod_max_input_bytes"),
    (zip_of(*((f"f{n}", b"") for n in range(MAX_ENTRIES + 1))), "entries"),
])
def test_unsafe_input_zips_are_refused_whole(body, words):
    with pytest.raises(BadMessage, match=words):
        input_files(body, 100_000 if words != "entries" else 10_000_000)


def test_setuid_bits_do_not_survive():
    """Modes are not kept at all: the files are staged as the job's input, mode 0600 in its spool."""
    files = input_files(zip_of(info=unix_entry("suid", 0o104755)), 1000)
    assert [f.name for f in files] == ["suid"]  # a regular file; its mode bits are dropped


def test_results_zip_round_trips():
    from gateway.lowlatency.archive import InputFile

    archive = zipfile.ZipFile(io.BytesIO(results_zip([InputFile("job.out", b"Hello Grid!\n"), InputFile("job.err", b"")])))
    assert archive.read("job.out") == b"Hello Grid!\n" and archive.read("job.err") == b""


# -- the [carod] knobs --------------------------------------------------------------------------------------------
def config(tmp_path, text: str):
    path = tmp_path / "gateway.toml"
    path.write_text(text)
    return load(path)


def test_carod_knobs_and_their_defaults(tmp_path):
    settings = config(tmp_path, '[carod]\nenable_carod = true\ncarod_broker_queue = "work"\ncarod_ip = "1.2.3.4"\n'
                                "carod_lease_time = 35\n").sections["carod"]
    assert settings.enable_carod and settings.rejected_queue == "work.rejected"
    assert settings.carod_broker_port == 5672 and settings.carod_default_owner == "nobody"
    assert not config(tmp_path, "").sections["carod"].enable_carod


@pytest.mark.parametrize("text, words", [
    ("carod_no_such = 1", "unknown setting"),
    ('carod_broker_port = "5672"', "expected int"),
    ("carod_prefetch = 0", "at least 1"),
    ('carod_default_owner = "root"', "never run as root"),
    ('carod_rejected_queue = "grid"', "rejected queue"),
])
def test_bad_carod_knobs_are_refused(tmp_path, text, words):
    with pytest.raises(ConfigError, match=words):
        config(tmp_path, f"[carod]\n{text}\n")


def test_the_poison_guard_counts_durably_and_forgets(tmp_path):
    from gateway.lowlatency.redeliveries import Redeliveries

    guard = Redeliveries(tmp_path / "redeliveries")
    assert [guard.bump("m-1") for _ in range(3)] == [1, 2, 3]
    assert Redeliveries(tmp_path / "redeliveries").bump("m-1") == 4  # a restarted gateway reads the count back
    assert guard.bump("other\udcff") == 1  # any message_id text, even one that is not valid UTF-8
    guard.forget("m-1")
    assert guard.bump("m-1") == 1
    assert not list((tmp_path / "redeliveries").glob("*.new"))

"""The condorSchedd fast path (gateway.soap.schedd_dispatch, gateway.soap.writer) answers byte for byte what spyne's
whole request cycle (gateway.soap.dispatch.SoapDispatcher) answers.

Two schedds on two local backends of their own (this process, one fake clock) get the same requests, one through each
dispatcher: every operation with its success and failure statuses, and faults for malformed XML, unknown operations
and invalid values; each side's transaction ids and state directory are the only differences allowed.  The reader
is also checked to read what real clients sent (tests/data/wire) as spyne does, without falling back; and the writer
against spyne's serialiser for answers of every operation's type filled in every way a field can be.
"""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

import pytest
from spyne import MethodContext
from spyne.model.binary import ByteArray
from spyne.model.complex import Array, ComplexModelBase
from spyne.model.enum import EnumBase
from spyne.model.primitive import Integer, Unicode
from spyne.server import ServerBase
from twisted.internet.defer import Deferred, maybeDeferred

from backends.local import LocalBackend
from gateway.core.auth import AccessPolicy, Caller
from gateway.core.schedd import BirdbathSchedd
from gateway.soap import models as m
from gateway.soap.application import schedd_application
from gateway.soap.context import RequestContext
from gateway.soap.dispatch import SoapAnswer, SoapDispatcher
from gateway.soap.protocol import normalise_enums
from gateway.soap.schedd import OPERATIONS
from gateway.soap.schedd_dispatch import ScheddDispatcher, WireAttr, read_job_ad
from gateway.soap.writer import AnswerWriter, Unwritable
from tests.conftest import WIRE
from tests.synchronous import run

CALLER = Caller("127.0.0.1", "tester")
ENV = "http://schemas.xmlsoap.org/soap/envelope/"


def envelope(op: str, inner: str = "", wrapper_attributes: str = "") -> bytes:
    return (f'<s:Envelope xmlns:s="{ENV}" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><s:Body>'
            f'<c:{op} xmlns:c="urn:condor"{wrapper_attributes}>{inner}</c:{op}></s:Body></s:Envelope>').encode()


def item(name: str, kind: str, value: str) -> str:
    return f"<item><name>{name}</name><type>{kind}</type><value>{value}</value></item>"


def answered(answer: SoapAnswer | Deferred) -> SoapAnswer:
    """A dispatcher's answer, given at once or by a Deferred (which must have fired: the backends here answer at
    once)."""
    async def wait() -> SoapAnswer:
        return await answer if isinstance(answer, Deferred) else answer

    return run(wait())


class Side:
    """One schedd with its own backend, behind one of the two dispatchers."""

    def __init__(self, root: Path, dispatcher: SoapDispatcher, clock) -> None:
        self.root = root
        self.backend = LocalBackend(root / "state", schedd_name="wire.example", clock=clock.seconds, slots=0)
        call = lambda function, *args, **kwargs: maybeDeferred(function, *args, **kwargs)  # noqa: E731
        schedd = BirdbathSchedd(self.backend, call, AccessPolicy(default_owner="tester"), clock)
        self.context = lambda: RequestContext(CALLER, schedd, dispatcher.ad_answers())
        self.dispatcher = dispatcher
        self.txn = 0

    def post(self, body: bytes) -> tuple[int, bytes]:
        """The HTTP status and body of the answer (or the exception the dispatcher raised, which the resource turns
        into a 500 with a Server fault)."""
        try:
            answer = answered(self.dispatcher.dispatch(body.replace(b"TXN", str(self.txn).encode()), self.context()))
        except Exception as exc:
            return 500, f"{type(exc).__name__}: {exc}".encode()
        found = re.search(rb"<transaction><id>(\d+)</id>", answer.body)
        if found and b"beginTransactionResponse" in answer.body:
            self.txn = int(found.group(1))
        text = answer.body.replace(str(self.root).encode(), b"ROOT")
        if self.txn:
            text = text.replace(b"<id>%d</id>" % self.txn, b"<id>TXN</id>")
        return answer.code, text


@pytest.fixture
def sides(tmp_path, clock):
    fast = Side(tmp_path / "fast", ScheddDispatcher(schedd_application()), clock)
    spyne = Side(tmp_path / "spyne", SoapDispatcher(schedd_application()), clock)
    yield fast, spyne
    fast.backend.close()
    spyne.backend.close()


T = "<transaction><id>TXN</id><duration>60</duration></transaction>"
NIL_T = '<transaction xsi:nil="true"/>'
JOB = "<clusterId>1</clusterId><jobId>0</jobId>"
DATA = base64.b64encode(b"abc").decode()
AD = "".join((item("Cmd", "STRING-ATTR", "/bin/true"), item("Arguments", "115", "a &amp; b"),
              item("Requirements", "EXPRESSION-ATTR", "TRUE"), item("Rank", "120", "1 + 2"),
              item("Done", "BOOLEAN-ATTR", "FALSE"), item("Weight", "FLOAT-ATTR", "1.5"),
              item("Count", "INTEGER-ATTR", "7"), item("TransferInput", "STRING-ATTR", "in.txt"),
              item("ShouldTransferFiles", "STRING-ATTR", "YES")))

#: a whole session: every operation, with the statuses it answers (names the step for the failure message)
SESSION: list[tuple[str, bytes]] = [
    ("version", envelope("getVersionString")),
    ("platform", envelope("getPlatformString")),
    ("begin", envelope("beginTransaction", "<duration>60</duration>")),
    ("begin without a duration", envelope("beginTransaction")),
    ("new cluster", envelope("newCluster", T)),
    ("new job", envelope("newJob", T + "<clusterId>1</clusterId>")),
    ("new job, unknown cluster", envelope("newJob", T + "<clusterId>77</clusterId>")),
    ("new job, no transaction", envelope("newJob", NIL_T + "<clusterId>1</clusterId>")),
    ("requirements", envelope("discoverJobRequirements", f"<jobAd>{AD}</jobAd>")),
    ("requirements of nil", envelope("discoverJobRequirements", '<jobAd xsi:nil="true"/>')),
    ("declare", envelope("declareFile", T + JOB + "<name>in.txt</name><size>3</size><hashType>NOHASH</hashType>")),
    ("declare again", envelope("declareFile", T + JOB + "<name>in.txt</name><size>3</size><hashType>0</hashType>")),
    ("declare md5", envelope("declareFile", T + JOB + "<name>b.txt</name><size>3</size><hashType>MD5HASH</hashType>"
                             f"<hash>{hashlib.md5(b'abc').hexdigest()}</hash>")),
    ("declare a bad name", envelope("declareFile", T + JOB + "<name>../x</name><size>3</size>")),
    ("send", envelope("sendFile", T + JOB + f"<name>in.txt</name><offset>0</offset><data>{DATA}</data>")),
    ("send md5", envelope("sendFile", T + JOB + f"<name>b.txt</name><offset>0</offset><data>{DATA}</data>")),
    ("send not base64", envelope("sendFile", T + JOB + "<name>in.txt</name><offset>0</offset><data>@@@</data>")),
    ("send undeclared", envelope("sendFile", T + JOB + f"<name>zz</name><offset>0</offset><data>{DATA}</data>")),
    ("submit", envelope("submit", T + JOB + f"<jobAd>{AD}</jobAd>")),
    ("submit a bad attribute", envelope("submit", T + JOB + f"<jobAd>{item('Bad Name', 'STRING-ATTR', 'x')}</jobAd>")),
    ("list spool", envelope("listSpool", T + JOB)),
    ("get file", envelope("getFile", T + JOB + "<name>in.txt</name><offset>0</offset><length>3</length>")),
    ("get an unknown file", envelope("getFile", T + JOB + "<name>nope</name><offset>0</offset><length>3</length>")),
    ("extend", envelope("extendTransaction", T + "<duration>120</duration>")),
    ("commit", envelope("commitTransaction", T)),
    ("commit again", envelope("commitTransaction", T)),
    ("job ad", envelope("getJobAd", JOB)),
    ("unknown job ad", envelope("getJobAd", "<clusterId>9</clusterId><jobId>9</jobId>")),
    ("job ads", envelope("getJobAds", "<constraint>TRUE</constraint>")),
    ("job ads, nil constraint", envelope("getJobAds", '<constraint xsi:nil="true"/>')),
    ("job ads, a bad constraint", envelope("getJobAds", "<constraint>((</constraint>")),
    ("hold", envelope("holdJob", NIL_T + JOB + "<reason>r &lt;1&gt;</reason><email-user>false</email-user>"
                                               "<email-admin>0</email-admin><system-hold>true</system-hold>")),
    ("release", envelope("releaseJob", NIL_T + JOB + "<reason>go</reason>")),
    ("release again", envelope("releaseJob", NIL_T + JOB + "<reason>go</reason>")),
    ("reschedule", envelope("requestReschedule")),
    ("template", envelope("createJobTemplate", JOB + "<owner>tester</owner><type>5</type><cmd>/bin/echo</cmd>"
                                                     "<args>a b</args><requirements>TRUE</requirements>")),
    ("template, local universe", envelope("createJobTemplate", JOB + "<type>LOCALUNIVESE</type><cmd>/bin/true</cmd>")),
    ("template, a bad universe", envelope("createJobTemplate", JOB + "<type>NOSUCH</type><cmd>/bin/true</cmd>")),
    ("close spool", envelope("closeSpool", NIL_T + JOB)),
    ("remove", envelope("removeJob", NIL_T + JOB + "<reason>bye</reason><force-removal>false</force-removal>")),
    ("remove unknown", envelope("removeJob", NIL_T + "<clusterId>5</clusterId><jobId>5</jobId>")),
    ("remove cluster", envelope("removeCluster", NIL_T + "<clusterId>1</clusterId><reason>x</reason>")),
    ("begin to abort", envelope("beginTransaction", "<duration>60</duration>")),
    ("abort", envelope("abortTransaction", T)),
    ("abort again", envelope("abortTransaction", T)),
    ("an unqualified operation", b'<s:Envelope xmlns:s="%s"><s:Body><getVersionString/></s:Body></s:Envelope>'
     % ENV.encode()),
    ("members in another namespace, comments, unknown members",
     envelope("getJobAd", '<!-- c --><x:clusterId xmlns:x="urn:other">1</x:clusterId><jobId>0</jobId><extra/>')),
    ("xsi:type on members", envelope("getJobAd", '<clusterId xsi:type="xsd:int">1</clusterId><jobId>0</jobId>')),
    # faults: malformed, unknown, invalid
    ("malformed XML", b"<s:Envelope"),
    ("a DTD", b'<!DOCTYPE x [<!ENTITY e "x">]><s:Envelope xmlns:s="%s"><s:Body/></s:Envelope>' % ENV.encode()),
    ("not an envelope", b"<x/>"),
    ("an empty body", b'<s:Envelope xmlns:s="%s"><s:Body/></s:Envelope>' % ENV.encode()),
    ("an unknown operation", envelope("frobnicate")),
    ("another namespace", envelope("getVersionString").replace(b"urn:condor", b"urn:other")),
    ("an invalid int", envelope("getJobAd", "<clusterId>abc</clusterId><jobId>0</jobId>")),
    ("an int out of range", envelope("getJobAd", "<clusterId>99999999999</clusterId><jobId>0</jobId>")),
    ("an invalid boolean", envelope("removeJob", NIL_T + JOB + "<force-removal>maybe</force-removal>")),
    ("an invalid enum", envelope("declareFile", T + JOB + "<name>q</name><size>1</size><hashType>SHA</hashType>")),
    ("a member twice", envelope("getJobAd", "<clusterId>1</clusterId><clusterId>1</clusterId><jobId>0</jobId>")),
    ("nil operation element", envelope("getVersionString", "", ' xsi:nil="true"')),
    ("an unqualified attribute", envelope("getJobAd", '<clusterId jobId="3">1</clusterId>')),
    ("nil where not nillable", envelope("getJobAd", '<clusterId xsi:nil="true"/><jobId>0</jobId>')),
]


def test_every_operation_answers_the_same_bytes_as_spyne(sides, monkeypatch):
    import gc

    import spyne.context

    collections: list[int] = []  # spyne's per-request gc.collect() stays off on both paths (gateway.soap.compat)
    monkeypatch.setattr(spyne.context, "_LAST_GC_RUN", 0.0)
    monkeypatch.setattr(gc, "collect", lambda *args: collections.append(1) or 0)
    fast, spyne = sides
    succeeded, codes = set(), set()
    for step, body in SESSION:
        code, answer = fast.post(body)
        assert (code, answer) == spyne.post(body), step
        assert (code == 200) == (fast.dispatcher.read(body.replace(b"TXN", b"1")) is not None), step
        status = re.search(rb"<code>(\w+)</code>", answer)
        codes.add(status.group(1).decode() if status else "fault" if b"Fault" in answer else code)
        if status and status.group(1) == b"SUCCESS":
            succeeded.add(re.search(rb"<tns:(\w+)Response>", answer).group(1).decode())
    assert succeeded == set(OPERATIONS)
    assert {"FAIL", "INVALIDTRANSACTION", "UNKNOWNJOB", "ALREADYEXISTS", "fault", 500} <= codes
    assert not collections


def test_the_fast_path_reads_what_real_clients_sent_as_spyne_does():
    dispatcher = ScheddDispatcher(schedd_application())
    server = ServerBase(schedd_application())
    read = 0
    for path in sorted((WIRE / "requests").rglob("*.xml")):
        body = path.read_bytes()
        call = dispatcher.read(body)
        ctx = MethodContext(server, MethodContext.SERVER)
        ctx.in_string = [body]
        ctx = server.generate_contexts(ctx)[0]
        if ctx.in_error is None:
            server.get_in_object(ctx)
        if ctx.in_error is not None:
            assert call is None, path
            continue
        assert call is not None, f"{path}: a request clients send takes spyne's slow path"
        assert call.operation == ctx.method_request_string.rsplit("}", 1)[1]
        assert [plain(value) for value in call.arguments] == [plain(value) for value in ctx.in_object], path
        read += 1
    assert read >= 20


def plain(value):
    """A parsed value as comparable plain data (spyne's models compare by identity)."""
    if isinstance(value, ComplexModelBase):
        return {name: plain(getattr(value, name, None)) for name in type(value).get_flat_type_info(type(value))}
    if isinstance(value, WireAttr):  # the fast reader's job-ad attribute
        return value._asdict()
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if type(value).__name__ == "EnumValue":  # spyne's enumeration value: what the operations read of it is its str
        return str(value)
    return value


# -- the writer, for answers filled every way ----------------------------------------------------------------------
TEXTS = ("Success", "", "a <b> & c\r\n\t\"'", "ünïcødé ✓")


def variants(cls: type, depth: int = 0) -> list:
    """Values of a model class: None, and for each field every value it may take (one field varied at a time)."""
    if issubclass(cls, Array):
        (member,) = cls._type_info.values()
        members = variants(member, depth + 1)
        return [None, [], [v for v in members if v is not None][:3]]
    if issubclass(cls, ComplexModelBase):
        fields = cls.get_flat_type_info(cls)
        base = {name: next(v for v in variants(kind, depth + 1) if v is not None) for name, kind in fields.items()}
        values = [cls(**base), cls()]
        for name, kind in fields.items():
            values += [cls(**dict(base, **{name: value})) for value in variants(kind, depth + 1)]
        return values
    if issubclass(cls, EnumBase):
        return [None, *cls.__values__]
    if issubclass(cls, ByteArray):
        return [None, [b""], [b"\x00\xff data"]]
    if issubclass(cls, Integer):
        return [None, 0, -1, 2**31 - 1]
    if issubclass(cls, Unicode):
        return [None, *TEXTS]
    raise AssertionError(f"no variants for {cls}")


def test_the_writer_writes_every_answer_as_spyne_does():
    dispatcher = ScheddDispatcher(schedd_application())
    application = schedd_application()
    methods = {name.rsplit("}", 1)[1]: descriptors[0]
               for name, descriptors in application.interface.service_method_map.items()}
    writer = AnswerWriter(application.out_protocol,
                          {op: d.out_message._type_info["response"] for op, d in methods.items()}, dispatcher.render)
    written = 0
    for operation, descriptor in methods.items():
        for answer in variants(descriptor.out_message._type_info["response"]):
            if answer is None:
                continue
            try:
                document = writer.write(operation, answer)
            except Unwritable:
                continue
            assert document == dispatcher.render(operation, answer), (operation, plain(answer))
            written += 1
    assert written > 150


def test_what_the_writer_cannot_write_is_left_to_spyne():
    from gateway.soap import models as m

    dispatcher = ScheddDispatcher(schedd_application())
    application = schedd_application()
    writer = AnswerWriter(application.out_protocol, {"getVersionString": m.StringAndStatus,
                                                     "listSpool": m.FileInfoArrayAndStatus}, dispatcher.render)
    with pytest.raises(Unwritable):
        writer.write("getVersionString", m.StringAndStatus(status=m.Status(code="FAIL", message="bell \x07")))
    with pytest.raises(Unwritable):
        writer.write("listSpool", m.FileInfoArrayAndStatus(info=[None]))
    with pytest.raises(Unwritable):
        writer.write("getVersionString", m.StringAndStatus())


# -- large getJobAds answers, streamed ------------------------------------------------------------------------------
def test_a_streamed_job_ads_answer_has_the_bytes_of_the_whole_one(sides, monkeypatch):
    from gateway.soap import schedd as service

    fast, spyne = sides
    fast.post(envelope("beginTransaction", "<duration>60</duration>"))
    fast.post(envelope("newCluster", T))
    for proc in range(5):
        fast.post(envelope("newJob", T + "<clusterId>1</clusterId>"))
        fast.post(envelope("submit", T + f"<clusterId>1</clusterId><jobId>{proc}</jobId><jobAd>{AD}</jobAd>"))
    fast.post(envelope("commitTransaction", T))
    query = envelope("getJobAds", "<constraint>TRUE</constraint>")
    whole = answered(fast.dispatcher.dispatch(query, fast.context()))
    assert whole.chunks is None and whole.body.count(b"<name>ClusterId</name>") == 5
    monkeypatch.setattr(service, "STREAMED_ADS", 2)
    streamed = answered(fast.dispatcher.dispatch(query, fast.context()))
    assert streamed.body == b"" and streamed.chunks is not None
    pieces = list(streamed.chunks)
    assert b"".join(pieces) == whole.body
    small = fast.context().answers.stream_job_ads(run(fast.context().schedd.get_job_ads(CALLER, None, "TRUE")), 100)
    assert len(list(small)) == 7  # the head, one piece per ad (each over 100 bytes), the last with the tail


JOB_AD_ITEMS = (
    "<item><name>A</name><type>STRING-ATTR</type><value>v</value></item>",
    "<item><name>A</name><type>STRING-ATTR</type><value></value></item>",
    "<item><name>A</name><type>STRING-ATTR</type><value/></item>",
    "<item><name>A</name><type>STRING-ATTR</type></item>",
    "<item><name>A</name><type>STRING-ATTR</type><value> x </value></item>",
    "<item><name>A</name><type>STRING-ATTR</type><value><![CDATA[a<b]]></value></item>",
    "<item><name>A</name><value>1</value></item>",
    "<item><value>1</value><type>INTEGER-ATTR</type><name>B</name></item>",
    "<item></item>",
    "<item/>",
    "<item><name></name><type>STRING-ATTR</type><value>v</value></item>",
    "<item><name>A</name><type>STRING-ATTR</type><value>a&amp;b</value><!-- c --></item>",
    "\n  <item>\n    <name>A</name>\n    <type>EXPRESSION-ATTR</type>\n    <value>x =?= 1</value>\n  </item>\n",
    "<item><name>A</name><type>115</type><value>v</value></item>",  # the C values of the types, as gSOAP took them
    "<item><name>A</name><type> 110 </type><value>1</value></item>",
)

#: items only spyne reads (its value, or its fault, stays the answer)
SPYNE_ITEMS = (
    "<item><name>A</name><type></type><value>v</value></item>",
    "<item><name>A</name><type>TUPLE</type><value>v</value></item>",
    '<item><name>A</name><type>STRING-ATTR</type><value xsi:nil="true"/></item>',
    "<item><name>A</name><name>B</name></item>",
    "<item><c:name>A</c:name></item>",
    "<item><name>A<b/></name></item>",
    "<item>text<name>A</name></item>",
    "<other><name>A</name></other>",
    '<item id="1"><name>A</name></item>',
    "<item><name>A</name><type>999</type><value>v</value></item>",
    "<item><name>A</name><type>STRING-ATTR </type><value>v</value></item>",
    "<item><name>A</name><!-- c -->x<value>v</value></item>",
    "<item><name>A</name><value>v<!-- c --></value></item>",
    "<item><name>A</name></item>junk",
    "<c:item><name>A</name></c:item>",
    "<!-- spyne reads a comment between the items as an item -->",
)


def _job_ad_element(items: str):
    from lxml import etree

    return etree.fromstring(f'<jobAd xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xmlns:c="urn:condor">'
                            f'{items}</jobAd>')


def test_the_job_ad_reader_reads_what_spyne_reads_and_leaves_the_rest_to_it():
    protocol = schedd_application().in_protocol
    for items in JOB_AD_ITEMS + ("".join(JOB_AD_ITEMS), ""):
        fast = read_job_ad(_job_ad_element(items))
        assert fast is not None, items
        submit = _job_ad_element(items).getroottree().getroot().makeelement("submit")
        submit.append(_job_ad_element(items))
        normalise_enums(submit, "submit")  # what spyne reads: the C values turned into names first
        slow = protocol.from_element(None, m.NullableClassAdStruct, submit[0])
        assert [plain(a) for a in fast] == [plain(a) for a in slow or []], items
    for items in SPYNE_ITEMS:
        assert read_job_ad(_job_ad_element(JOB_AD_ITEMS[0] + items)) is None, items


def test_answer_models_are_built_as_spyne_builds_them():
    """``schedd.build`` makes every model spyne's ``__init__`` would make, member for member, and leaves the models
    it cannot make that way (customised ones, unknown members) to spyne."""
    from gateway.soap.schedd import build

    models = [cls for cls in vars(m).values()
              if isinstance(cls, type) and issubclass(cls, ComplexModelBase) and cls.__module__ == m.__name__]
    assert len(models) > 10
    for cls in models:
        fields = list(cls.get_flat_type_info(cls))
        for members in ({}, {name: f"value of {name}" for name in fields}, dict.fromkeys(fields[:1], 0)):
            built = build(cls, **members)
            assert type(built) is cls and vars(built) == vars(cls(**members)), (cls, members)
    assert vars(build(m.Status, code="OK", colour="red")) == vars(m.Status(code="OK", colour="red"))
    assert build(m.NullableTransaction, id=1).id == 1


def test_an_operation_that_fails_answers_the_same_server_fault_whether_it_waited_or_not(sides, monkeypatch):
    """A bug in an operation (an exception other than a Birdbath status) is a Server fault on both paths, raised at
    once or after the operation waited for its backend; an operation that waits is answered when it is done."""
    fast, spyne = sides

    def broken(self):
        raise RuntimeError("broken at once")

    monkeypatch.setattr(BirdbathSchedd, "version_string", broken)
    body = envelope("getVersionString")
    code, answer = fast.post(body)
    assert (code, answer) == spyne.post(body)
    assert code == 500 and b"Internal error in getVersionString: broken at once" in answer

    waits: list[Deferred] = []

    async def waiting(self, caller, txn):
        waits.append(Deferred())
        return await waits[-1]

    monkeypatch.setattr(BirdbathSchedd, "new_cluster", waiting)
    body = envelope("newCluster", NIL_T)
    answers = [side.dispatcher.dispatch(body, side.context()) for side in (fast, spyne)]
    assert len(waits) == 2 and all(isinstance(answer, Deferred) and not answer.called for answer in answers)
    waits[0].errback(RuntimeError("broken later"))
    waits[1].errback(RuntimeError("broken later"))
    fast_answer, spyne_answer = (answered(answer) for answer in answers)
    assert (fast_answer.code, fast_answer.body) == (spyne_answer.code, spyne_answer.body)
    assert fast_answer.code == 500 and b"Internal error in newCluster: broken later" in fast_answer.body

    monkeypatch.setattr(BirdbathSchedd, "new_cluster", waiting)
    answer = fast.dispatcher.dispatch(body, fast.context())
    waits[-1].callback(7)
    assert b"<integer>7</integer>" in answered(answer).body


#: (value element, whether the fast reader reads it itself): plain values are read fast, the rest left to spyne
INT_VALUES = [("0", True), ("7", True), ("-12", True), ("123456789", True), ("-999999999", True),
              ("1234567890", True), ("2147483647", True), ("-2147483648", False), ("-1234567890", False),
              ("-214748364", True), ("2147483648", False),
              ("-2147483649", False), ("9999999999", False), ("12345678901", False),
              ("-0", False), ("+1", False), ("007", False), (" 1", False), ("1 ", False), ("\n1\n", False),
              ("1_000", False), ("١٢", False), ("1.0", False), ("abc", False), ("", False), ("0x10", False),
              ("1e3", False), ("1<!-- c -->", False), ("<x/>1", False), ("1<x>2</x>", False)]
STRING_VALUES = [("text", True), (" spaced  out ", True), ("\n", True), ("a &amp; b &lt;c&gt;", True),
                 ("é ü 中", True), ("&#x1F600;", True), ("<![CDATA[<raw>]]>", True), ("x" * 10000, True),
                 ("", False), ("a<!-- c -->b", False), ("<b>bold</b>", False), ("a<x/>", False)]
TRANSACTIONS = [("<id>5</id><duration>60</duration>", True), ("<duration>60</duration><id>5</id>", True),
                ("\n  <id>5</id>\n  <duration>0</duration>\n", True),
                ("<id>5</id>", False), ("<id>5</id><id>6</id><duration>1</duration>", False),
                ("<id>5</id><duration>60</duration><extra>1</extra>", False),
                ("<c:id>5</c:id><duration>60</duration>", False), ("<id>x</id><duration>60</duration>", False),
                ("<id>99999999999</id><duration>60</duration>", False),
                ("junk<id>5</id><duration>60</duration>", False), ("<id>5</id>junk<duration>60</duration>", False),
                ("<!-- c --><id>5</id><duration>60</duration>", False), ("", False),
                ('<id xsi:nil="true"/><duration>60</duration>', False)]


def _parameter(inner: str, attributes: str = "") -> object:
    from lxml import etree

    return etree.fromstring(f'<p xmlns:c="urn:condor" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"'
                            f'{attributes}>{inner}</p>')


def _described(value: object) -> tuple[type, object]:
    """A value read, with its type (and a model's members)."""
    return type(value), vars(value) if isinstance(value, ComplexModelBase) else value


def _spyne_reads(protocol, kind, element) -> tuple[object, object]:
    try:
        return _described(protocol.from_element(None, kind, element))
    except Exception as exc:
        return "fault", type(exc)


def test_the_fast_readers_read_what_spyne_reads_and_leave_the_rest_to_it():
    """Ints, strings and transactions read without spyne give exactly spyne's value (its type and members); anything
    unusual (attributes, xsi:nil, markup, non-canonical numbers, values out of range) is left to spyne."""
    from spyne import Integer32, Unicode

    from gateway.soap.schedd_dispatch import FAST_READERS, SPYNE

    protocol = schedd_application().in_protocol
    cases = [(Integer32, INT_VALUES), (Unicode, STRING_VALUES), (m.NullableTransaction, TRANSACTIONS)]
    attributes = ['xsi:nil="true"', 'xsi:type="xsd:int"', 'other="1"', 'c:other="1"']
    assert {kind for kind, _ in cases} | {m.NullableClassAdStruct} == set(FAST_READERS)  # job ads: tested above
    for kind, values in cases:
        read = FAST_READERS[kind]
        for inner, fast in values:
            value = read(_parameter(inner))
            assert (value is not SPYNE) == fast, (kind, inner)
            if fast:
                assert _described(value) == _spyne_reads(protocol, kind, _parameter(inner)), (kind, inner)
            for attribute in attributes:
                assert read(_parameter(inner, " " + attribute)) is SPYNE, (kind, inner, attribute)


def test_attribute_types_are_read_as_the_enum_reads_them():
    from gateway.core.adstruct import AttrType
    from gateway.soap.schedd import attr_type

    for wire in [kind.value for kind in AttrType] + list(m.ClassAdAttrType.Attributes.values):  # spyne's values too
        assert attr_type(wire) is AttrType(str(wire))
    assert attr_type(None) is AttrType.EXPRESSION
    with pytest.raises(ValueError):
        attr_type("NO-SUCH-ATTR")

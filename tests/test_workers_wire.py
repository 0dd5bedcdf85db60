"""What crosses between a worker and the core (gateway.workers.wire): values come back as they went, job ads with
the client's expression texts and their revision, and what may not cross is refused where it is encoded; the link
(gateway.workers.link) hears its messages whole however the socket cuts them."""

from __future__ import annotations

import struct
from types import SimpleNamespace

import classad2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.internet.testing import StringTransport

from backends.interface import Revision, revision, stamp
from gateway.core.auth import Authentication, Caller, Permission
from gateway.core.status import BirdbathError, StatusCode
from gateway.core.transactions import TransactionRef
from gateway.identity.peers import PeerOwner
from gateway.workers import link, wire
from gateway.workers.link import MAX_MESSAGE, CallingLink, CoreCalls, Link, Message
from gateway.workers.parent import CoreLink
from jobmodel.exprtext import SourceExpr, TextedAd, expression_text


def crossed(value):
    """``value`` sent by one end of a new link and read by the other."""
    return wire.Codec().decode(wire.Codec().encode(value))


def test_a_job_ad_keeps_the_clients_expression_texts_and_its_revision():
    ad = TextedAd()
    ad["Requirements"] = SourceExpr("TARGET.Disk>=1024&&MY.x=?=FALSE")
    ad["Rank"] = classad2.ExprTree("Memory >= 1.0E3")
    ad["Cmd"] = "/bin/true"
    stamp(ad, (12, 3), 41)
    back = crossed(ad)
    assert expression_text(back, "Requirements", back.lookup("Requirements")) == "TARGET.Disk>=1024&&MY.x=?=FALSE"
    assert expression_text(back, "Rank", back.lookup("Rank")) == expression_text(ad, "Rank", ad.lookup("Rank"))
    assert back["Cmd"] == "/bin/true"
    assert revision(back) == Revision((12, 3), 41)


def test_an_ad_without_a_revision_arrives_without_one():
    assert revision(crossed(classad2.ClassAd({"A": 1}))) is None


def test_a_clients_expression_keeps_its_text():
    back = crossed(SourceExpr("a =?= b || c =!= 1.0E3"))
    assert isinstance(back, SourceExpr) and back.text == "a =?= b || c =!= 1.0E3"


def test_callers_statuses_and_refs_cross_whole():
    caller = Caller("127.0.0.1", "alice", Authentication.IDTOKEN, permissions=frozenset({Permission.READ}))
    assert crossed(caller).permissions == frozenset({Permission.READ}) and crossed(caller) == caller
    assert crossed(TransactionRef(7, 60)) == TransactionRef(7, 60)
    owner = PeerOwner(True, 1001, "alice")  # what the kernel said of a connection's client, passed with it
    assert crossed(owner) == owner and crossed(PeerOwner(True, problem="unproven")).problem == "unproven"
    error = crossed(BirdbathError(StatusCode.FAIL, "no"))
    assert isinstance(error, BirdbathError) and error.status.message == "no"


def test_a_value_of_no_listed_kind_is_refused_where_it_is_encoded():
    with pytest.raises(wire.Unencodable):
        wire.Codec().encode(object())


class Heard(Link):
    """A link end that records the CLOSED and RESULT messages it hears."""

    def __init__(self, capacity: int = wire.AD_TABLE_CAPACITY) -> None:
        super().__init__(wire.Codec(capacity))
        self.closed: list[int] = []
        self.results: list[object] = []

    def handle_closed(self, connection_id: int) -> None:
        self.closed.append(connection_id)

    def handle_result(self, call_id: int, ok: bool, value: object) -> None:
        self.results.append(value)


def linked(capacity: int = wire.AD_TABLE_CAPACITY) -> tuple[Heard, StringTransport]:
    end, transport = Heard(capacity), StringTransport()
    end.makeConnection(transport)
    return end, transport


def framed(*connection_ids: int) -> bytes:
    sender, transport = linked()
    for connection_id in connection_ids:
        sender.send(Message.CLOSED, connection_id)
    return transport.value()


def test_the_link_hears_messages_however_they_arrive_cut():
    data = framed(*range(1, 6))
    whole, _ = linked()
    whole.dataReceived(data)
    assert whole.closed == [1, 2, 3, 4, 5]
    for size in (1, 3, 7):
        cut, _ = linked()
        for start in range(0, len(data), size):
            cut.dataReceived(data[start:start + size])
        assert cut.closed == [1, 2, 3, 4, 5] and not cut._buffer
    half = len(data) // 2  # a chunk ending inside a message, then the rest with the next ones
    split, _ = linked()
    split.dataReceived(data[:half])
    split.dataReceived(data[half:] + framed(6))
    assert split.closed == [1, 2, 3, 4, 5, 6]


def test_the_link_closes_on_a_message_too_large_and_refuses_a_kind_it_does_not_handle():
    end, transport = linked()
    end.dataReceived(struct.pack("!I", MAX_MESSAGE + 1) + b"x" * 16)
    assert transport.disconnecting and end.closed == []
    stranger, _ = linked()
    sender, sent = linked()
    sender.send(Message.READY)
    with pytest.raises(AttributeError):  # (Twisted then closes the link: the worker ends, or the core)
        stranger.dataReceived(sent.value())


# -- job ads by revision: whole once, then by reference ------------------------------------------------------------
def job_ad(cluster: int, proc: int, number: int, *, stamped: bool = True) -> classad2.ClassAd:
    """A job's ad whose content is its revision number (two numbers, two contents), stamped unless told not."""
    ad = TextedAd()
    ad["ClusterId"], ad["ProcId"], ad["Content"] = cluster, proc, number
    ad["Requirements"] = SourceExpr("TARGET.Disk>=1024&&MY.x=?=FALSE")
    ad["Cmd"] = "/usr/bin/a-program-with-a-long-name"
    ad["Environment"] = "A=1 B=2 C=3 " * 10
    return stamp(ad, (cluster, proc), number) if stamped else ad


def tables(sender: wire.Codec, receiver: wire.Codec) -> tuple[list, list]:
    """What each end of one direction holds, in its order of use: (key, revision number)."""
    return (list(sender.sent.items()),
            [(key, revision(ad).number) for key, ad in receiver.received.items()])


def test_a_stamped_ad_crosses_whole_once_then_as_a_reference_to_the_same_object():
    sender, receiver = wire.Codec(), wire.Codec()
    ad = job_ad(12, 3, 41)
    first, second = sender.encode([ad]), sender.encode([ad])
    assert len(second) * 10 < len(first)
    [whole], [again] = receiver.decode(first), receiver.decode(second)
    assert again is whole and whole["Content"] == 41 and revision(again) == Revision((12, 3), 41)
    assert expression_text(again, "Requirements", again.lookup("Requirements")) == "TARGET.Disk>=1024&&MY.x=?=FALSE"
    both = receiver.decode(sender.encode([ad, ad]))  # twice in one message: whole at most once
    assert both[0] is both[1] is whole


def test_a_changed_revision_crosses_whole_again():
    sender, receiver = wire.Codec(), wire.Codec()
    [before] = receiver.decode(sender.encode([job_ad(12, 3, 41)]))
    changed = sender.encode([job_ad(12, 3, 42)])
    [after] = receiver.decode(changed)
    assert after is not before and after["Content"] == 42 and revision(after).number == 42
    assert len(changed) > len(sender.encode([job_ad(12, 3, 42)])) * 10
    assert tables(sender, receiver) == ([((12, 3), 42)], [((12, 3), 42)])


def test_an_ad_without_a_revision_always_crosses_whole_and_is_never_kept():
    sender, receiver = wire.Codec(), wire.Codec()
    ad = job_ad(12, 3, 41, stamped=False)
    first, second = sender.encode(ad), sender.encode(ad)
    assert first == second
    assert receiver.decode(first) is not receiver.decode(second)
    assert not sender.sent and not receiver.received


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 2), st.booleans()), max_size=5), max_size=30))
def test_both_ends_hold_the_same_ads_whatever_is_sent_and_evicted(messages):
    sender, receiver = wire.Codec(capacity=3), wire.Codec(capacity=3)
    for message in messages:
        sent = [job_ad(1, proc, number, stamped=stamped) for proc, number, stamped in message]
        back = receiver.decode(sender.encode(sent))
        assert [(ad["ProcId"], ad["Content"]) for ad in back] == [(proc, number) for proc, number, _ in message]
        assert tables(sender, receiver)[0] == tables(sender, receiver)[1]
        assert len(receiver.received) <= 3


def test_a_message_that_fails_to_encode_half_way_empties_both_ends_tables():
    sender, transport = linked(capacity=2)
    receiver, _ = linked(capacity=2)

    def heard() -> list:
        receiver.dataReceived(transport.value())
        transport.clear()
        return tables(sender.codec, receiver.codec)

    kept, other = job_ad(1, 0, 7), job_ad(1, 1, 7)
    sender.send(Message.RESULT, 1, True, [kept])
    assert heard() == ([((1, 0), 7)], [((1, 0), 7)])
    # before failing, the message used kept's entry and entered two more (evicting kept's): it is not sent
    with pytest.raises(wire.Unencodable):
        sender.send(Message.RESULT, 2, True, [kept, other, job_ad(1, 2, 7), object()])
    assert heard() == ([], []) and len(receiver.results) == 1  # FORGET alone arrived
    sender.send(Message.RESULT, 3, True, [other])
    sender.send(Message.RESULT, 4, True, [kept])
    assert heard() == ([((1, 1), 7), ((1, 0), 7)], [((1, 1), 7), ((1, 0), 7)])
    [first], [other_back], [kept_back] = receiver.results
    assert other_back["ProcId"] == 1 and kept_back is not first and kept_back["Content"] == 7  # whole again


def test_a_message_too_large_for_the_other_end_fails_alone_and_the_link_stays(monkeypatch):
    """The receiver would close the link on it (and a worker with its link ends, with all its connections): the
    sender refuses it instead, as a message that cannot be encoded, and the next ones cross as before."""
    sender, transport = linked()
    receiver, _ = linked()
    kept = job_ad(1, 0, 7)
    sender.send(Message.RESULT, 1, True, [kept])
    monkeypatch.setattr(link, "MAX_MESSAGE", len(transport.value()) + 2000)
    with pytest.raises(wire.MessageTooLarge, match="ask for fewer jobs"):
        sender.send(Message.RESULT, 2, True, [job_ad(1, proc, 7) for proc in range(1, 40)])
    receiver.dataReceived(transport.value())
    transport.clear()
    assert not receiver.transport.disconnecting and len(receiver.results) == 1
    assert tables(sender.codec, receiver.codec) == ([], [])  # FORGET alone arrived after the first answer
    sender.send(Message.RESULT, 3, True, [kept])
    receiver.dataReceived(transport.value())
    assert receiver.results[-1][0]["Content"] == 7 and not receiver.transport.disconnecting


def test_an_answer_too_large_fails_its_call_in_the_worker_and_both_ends_carry_on(monkeypatch):
    class Schedd:
        async def get_job_ads(self) -> list:
            return [job_ad(1, proc, 7) for proc in range(40)]

        async def who_am_i(self) -> int:
            return 1

    core = CoreLink(SimpleNamespace(pool=SimpleNamespace(calls=CoreCalls(lambda: {"schedd": Schedd()}))))
    core.transport, core.alive = StringTransport(), True  # (its own start would send constants it has none of)
    worker, worker_sent = CallingLink(), StringTransport()
    worker.makeConnection(worker_sent)
    monkeypatch.setattr(link, "MAX_MESSAGE", 3000)
    too_large, answered = worker.call("schedd", "get_job_ads"), worker.call("schedd", "who_am_i")
    core.dataReceived(worker_sent.value())
    worker.dataReceived(core.transport.value())
    failures, values = [], []
    too_large.addErrback(failures.append)
    answered.addCallback(values.append)
    assert failures[0].check(wire.MessageTooLarge) and "ask for fewer jobs" in failures[0].getErrorMessage()
    assert values == [1] and not worker_sent.disconnecting and not core.transport.disconnecting


def test_only_the_methods_a_contract_declares_cross_the_link():
    """A worker taken over by a hostile request reaches no more of the core than the contracts: a method of the
    service's class that no contract declares (``abort_all``, which aborts every caller's transactions), a private
    one, an instance's attribute (its backend) and an unknown service are refused by the core and run nothing,
    and a worker's stand-in has no such method at all."""
    from gateway.core.services import CONTRACTS, ScheddContract, operations
    from gateway.workers.link import OPERATIONS, RemoteObject

    ran: list[str] = []

    class Schedd:
        backend = SimpleNamespace(remove=lambda: ran.append("backend"))

        async def who_am_i(self) -> str:
            ran.append("who_am_i")
            return "me"

        def abort_all(self) -> None:
            ran.append("abort_all")

        def _enter(self) -> None:
            ran.append("_enter")

    core = CoreLink(SimpleNamespace(pool=SimpleNamespace(calls=CoreCalls(lambda: {"schedd": Schedd()}))))
    core.transport, core.alive = StringTransport(), True
    worker, worker_sent = CallingLink(), StringTransport()
    worker.makeConnection(worker_sent)
    calls = [worker.call(service, method) for service, method in
             [("schedd", "abort_all"), ("schedd", "_enter"), ("schedd", "backend"), ("schedd", "__init__"),
              ("backend", "remove"), ("schedd", "who_am_i")]]
    core.dataReceived(worker_sent.value())
    worker.dataReceived(core.transport.value())
    answers: list = []
    for call in calls:
        call.addCallbacks(answers.append, lambda failure: answers.append(failure.getErrorMessage()))
    assert answers[:5] == [f"no operation {name} in the core" for name in
                           ("schedd.abort_all", "schedd._enter", "schedd.backend", "schedd.__init__", "backend.remove")]
    assert answers[5] == "me" and ran == ["who_am_i"]
    stand_in = RemoteObject(worker, "schedd")
    for name in ("abort_all", "restage", "backend", "_enter"):
        with pytest.raises(AttributeError, match="declares no"):
            getattr(stand_in, name)
    assert callable(stand_in.submit_transaction)
    assert OPERATIONS["schedd"] == operations(ScheddContract) and set(OPERATIONS) == set(CONTRACTS)


def test_the_contracts_declare_what_the_core_defines():
    """Every declared method is one the core's service has, with the same parameters, and a coroutine (the one
    currency the link's CoreCalls wraps): a contract that drifted from its class would fail only when a worker
    called it."""
    import inspect

    from gateway.core.collector import BirdbathCollector
    from gateway.core.described import DescribedSubmissions
    from gateway.core.schedd import BirdbathSchedd
    from gateway.core.services import CONTRACTS, operations
    from gateway.core.submissions import SubmissionService
    from gateway.identity.throttle import LoginThrottle
    from gateway.monitoring.web import Monitor

    classes = {"schedd": BirdbathSchedd, "collector": BirdbathCollector, "submissions": SubmissionService,
               "described": DescribedSubmissions, "monitor": Monitor, "throttle": LoginThrottle}
    assert set(classes) == set(CONTRACTS)
    for service, contract in CONTRACTS.items():
        for name in operations(contract):
            declared, defined = (inspect.signature(getattr(owner, name)) for owner in (contract, classes[service]))
            assert list(declared.parameters) == list(defined.parameters), f"{service}.{name}"
            assert [p.default for p in declared.parameters.values()] == [
                p.default for p in defined.parameters.values()], f"{service}.{name}"
            assert inspect.iscoroutinefunction(getattr(classes[service], name)), f"{service}.{name} is no coroutine"


def test_a_reference_to_an_ad_not_held_is_refused():
    sender, receiver = wire.Codec(), wire.Codec()
    ad = job_ad(12, 3, 41)
    sender.encode([ad])
    reference = sender.encode([ad])
    with pytest.raises(wire.UnknownAd):
        receiver.decode(reference)
    receiver.decode(wire.Codec().encode([job_ad(12, 3, 40)]))  # held, at another revision
    with pytest.raises(wire.UnknownAd):
        receiver.decode(reference)
    sending, sent = linked()
    sending.send(Message.RESULT, 1, True, [ad])
    sent.clear()
    sending.send(Message.RESULT, 2, True, [ad])
    reader, _ = linked()
    with pytest.raises(wire.UnknownAd):  # out of dataReceived: Twisted logs it and closes the link
        reader.dataReceived(sent.value())


class FileDescriptorTransport(StringTransport):
    """What a link writes, with the descriptors it sends in order among the bytes."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[tuple[str, object]] = []

    def sendFileDescriptor(self, descriptor: int) -> None:
        self.sent.append(("descriptor", descriptor))

    def writeSequence(self, data) -> None:
        self.sent.append(("bytes", b"".join(data)))


class Handed:
    """A connection the core accepted, as ``CoreLink.pass_connection`` reads it."""

    def __init__(self, connection_id: int, owner: object) -> None:
        import socket

        from gateway.workers.parent import Front

        self.id, self.front = connection_id, Front.SITE
        self.transport = type("Accepted", (), {"fileno": lambda _: 100 + connection_id, "peer_owner": owner,
                                                "socket": type("Socket", (), {"family": socket.AF_INET})()})()


def test_a_connection_whose_message_cannot_be_encoded_sends_no_socket():
    """The worker pairs each CONNECTION with the next descriptor it receives: a socket sent without its message
    would be served as the next connection's."""
    from gateway.workers.parent import CoreLink

    link = CoreLink(worker=None)
    link.transport = transport = FileDescriptorTransport()
    with pytest.raises(wire.Unencodable):
        link.pass_connection(Handed(1, owner=object()))
    assert [kind for kind, _ in transport.sent] == ["bytes"] and 1 not in link.connections  # FORGET alone
    link.pass_connection(Handed(2, owner=PeerOwner(1000, "alice")))
    assert [kind for kind, _ in transport.sent[1:]] == ["descriptor", "bytes"] and transport.sent[1][1] == 102
    (_, data), (_, forget) = transport.sent[2], transport.sent[0]
    heard = wire.Codec()
    assert heard.decode(forget[4:]) == [Message.FORGET.value]
    assert heard.decode(data[4:])[:2] == [Message.CONNECTION.value, 2] and 2 in link.connections

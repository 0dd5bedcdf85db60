"""What crosses between a worker and the core (gateway.workers.wire): values come back as they went, job ads with
the client's expression texts and their revision, and what may not cross is refused where it is encoded; the link
(gateway.workers.link) hears its messages whole however the socket cuts them."""

from __future__ import annotations

import struct

import classad2
import pytest
from twisted.internet.testing import StringTransport

from backends.interface import Revision, revision, stamp
from gateway.core.auth import Authentication, Caller, Permission
from gateway.core.status import BirdbathError, StatusCode
from gateway.core.transactions import TransactionRef
from gateway.identity.peers import PeerOwner
from gateway.workers import wire
from gateway.workers.link import MAX_MESSAGE, Link, Message
from jobmodel.exprtext import SourceExpr, TextedAd, expression_text


def crossed(value):
    return wire.decode(wire.encode(value))


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
        wire.encode(object())


class Heard(Link):
    """A link end that records the CLOSED messages it hears."""

    def __init__(self) -> None:
        super().__init__()
        self.closed: list[int] = []

    def handle_closed(self, connection_id: int) -> None:
        self.closed.append(connection_id)


def linked() -> tuple[Heard, StringTransport]:
    end, transport = Heard(), StringTransport()
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

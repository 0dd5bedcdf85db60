"""What crosses between a worker and the core (gateway.workers.wire): values come back as they went, job ads with
the client's expression texts and their revision, and what may not cross is refused where it is encoded."""

from __future__ import annotations

import classad2
import pytest

from backends.interface import Revision, revision, stamp
from gateway.core.auth import Authentication, Caller, Permission
from gateway.core.status import BirdbathError, StatusCode
from gateway.core.transactions import TransactionRef
from gateway.identity.peers import PeerOwner
from gateway.workers import wire
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

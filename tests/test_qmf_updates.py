"""What the agent sends of itself and when: its unsolicited data indications (gateway/qmf/updates.py), every
qmf_update_interval after its heartbeat, the watched objects that changed and those that are gone, one message per
class on the topic exchange; and its answer to a locate, at once, whatever its reactor is doing.  In this process on
the local backend, on a fake clock, with the broker link replaced by a recorder of what the agent sends (the real
broker and a real qmf.console receiving them: test_qmf.py)."""

from __future__ import annotations

import pytest
from proton import Message
from twisted.internet.task import Clock

from backends.interface import ActionChange, Batch
from gateway.core.adstruct import Attr, AttrType
from gateway.core.auth import Authentication, Caller
from gateway.core.transactions import AdRules, NewCluster, WholeTransaction
from gateway.qmf.agent import QmfAgent
from gateway.qmf.settings import QmfSettings
from jobmodel.jobs import JobAction
from tests.qmf_queue import SCHEDD, ManyJobs
from tests.synchronous import run

INTERVAL = 5


class RecordedLink:
    """What the agent sends, kept instead of sent (connected as the test says)."""

    def __init__(self) -> None:
        self.connected = True
        self.sent: list = []

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def send(self, exchange: str, message) -> None:
        self.sent.append((exchange, message))

    def indications(self) -> dict[str, list[dict]]:
        """The data indications sent since the last call, by subject."""
        found = {message.subject: message.body for _, message in self.sent
                 if message.properties["qmf.opcode"] == "_data_indication"}
        assert all(message.properties["method"] == "indication" for _, message in self.sent)
        self.sent.clear()
        return found


class BusyReactor(Clock):
    """A fake clock standing for a reactor that is busy: what another thread hands it waits until :meth:`free`."""

    def __init__(self) -> None:
        super().__init__()
        self.handed: list = []

    def callFromThread(self, function, *args, **kwargs) -> None:
        self.handed.append((function, args, kwargs))

    def free(self) -> None:
        while self.handed:
            function, args, kwargs = self.handed.pop(0)
            function(*args, **kwargs)


@pytest.fixture
def agent(tmp_path):
    queue = ManyJobs(tmp_path, 2, 3)
    clock = BusyReactor()
    made = QmfAgent(clock, QmfSettings(enable_qmf=True, qmf_update_interval=INTERVAL), queue.schedd,
                    queue.submissions, queue.collector)
    made.link = RecordedLink()
    made.start()
    yield made, clock, queue
    made.stop()
    queue.close()


def submit(queue: ManyJobs, owner: str) -> tuple[int, int]:
    job = [Attr("Cmd", AttrType.STRING, "/bin/true"), Attr("Iwd", AttrType.STRING, "/tmp"),
           Attr("Requirements", AttrType.EXPRESSION, "TRUE"), Attr("Owner", AttrType.STRING, owner)]
    return run(queue.schedd.submit_transaction(Caller("127.0.0.1", owner, Authentication.SOCKET), WholeTransaction(
        [NewCluster([job], rules=AdRules.SUBMISSION_API)]))).jobs[0]


def values(maps: list[dict]) -> dict[str, dict]:
    return {item["_object_id"]["_object_name"].rsplit(":", 1)[1]: item for item in maps}


def test_each_interval_tells_the_objects_that_changed_and_nothing_when_none_did(agent):
    agent, clock, queue = agent
    clock.advance(INTERVAL - 1)
    assert agent.link.sent == []  # (driven by the clock alone)
    clock.advance(1)
    first = agent.link.indications()
    assert set(first) == {"agent.ind.data.com_redhat_grid.scheduler", "agent.ind.data.com_redhat_grid.submitter",
                          "agent.ind.data.com_redhat_grid.submission"}
    (scheduler,) = first["agent.ind.data.com_redhat_grid.scheduler"]
    assert scheduler["_values"]["TotalIdleJobs"] == 6 and scheduler["_delete_ts"] == 0
    assert len(first["agent.ind.data.com_redhat_grid.submission"]) == 2
    clock.advance(INTERVAL)
    assert agent.link.indications() == {}  # nothing changed: only the heartbeat
    job = submit(queue, "alice")
    clock.advance(INTERVAL)
    second = agent.link.indications()
    assert values(second["agent.ind.data.com_redhat_grid.scheduler"])[SCHEDD]["_values"]["TotalIdleJobs"] == 7
    assert set(values(second["agent.ind.data.com_redhat_grid.submitter"])) == {"alice"}  # nobody's did not change
    assert set(values(second["agent.ind.data.com_redhat_grid.submission"])) == {f"{SCHEDD}#{job[0]}"}
    # alice's one job leaves the queue: her submitter is gone, told with its deletion time
    queue.backend.commit(Batch(changes=[ActionChange(JobAction.REMOVE, *job, "gone")]))
    clock.advance(INTERVAL)
    third = agent.link.indications()
    (alice,) = third["agent.ind.data.com_redhat_grid.submitter"]
    assert alice["_object_id"]["_object_name"].endswith(":alice") and alice["_delete_ts"] > 0


def test_nothing_is_told_while_the_broker_is_away_and_everything_when_it_is_back(agent):
    agent, clock, _ = agent
    clock.advance(INTERVAL)
    assert agent.link.indications()
    agent.link.connected = False
    clock.advance(INTERVAL)
    assert agent.link.sent == []
    agent.link.connected = True
    agent._changed(True)  # (what the link's thread hands the reactor when the connection is back)
    again = agent.link.indications()
    assert len(again["agent.ind.data.com_redhat_grid.submission"]) == 2  # unchanged, told again


def test_a_policy_that_refuses_the_reads_publishes_nothing_and_the_heartbeat_goes_on(agent, monkeypatch):
    agent, clock, queue = agent

    async def refused(*_):
        from gateway.core.submissions import fail
        raise fail("Permission denied")

    monkeypatch.setattr(queue.submissions, "summaries", refused)
    clock.advance(INTERVAL)
    opcodes = [message.properties["qmf.opcode"] for _, message in agent.link.sent]
    assert opcodes == ["_agent_heartbeat_indication"]


def test_a_locate_is_answered_in_the_links_thread_while_the_reactor_is_busy(agent):
    """qmf.console lists the agents one broker round trip after it asks for them (a script's first getObjects
    straight after addBroker): the answer to a locate cannot wait for the reactor; a query does."""
    agent, reactor, _ = agent

    def request(opcode: str, correlation: str, body) -> Message:
        return Message(reply_to="qmf.default.direct/console-reply", correlation_id=correlation, body=body,
                       properties={"qmf.opcode": opcode, "method": "request"})

    agent._arrived(request("_query_request", "query-1", {"_what": "OBJECT", "_schema_id": {
        "_package_name": "com.redhat.grid", "_class_name": "scheduler"}}))
    agent._arrived(request("_agent_locate_request", "locate-1", []))
    [(exchange, answer)] = agent.link.sent
    assert (exchange, answer.subject, answer.correlation_id) == ("qmf.default.direct", "console-reply", "locate-1")
    assert answer.properties["qmf.opcode"] == "_agent_locate_response"
    assert answer.body["_values"]["_name"] == agent.name and agent.answered == 0
    reactor.free()
    opcodes = [(message.properties["qmf.opcode"], message.correlation_id) for _, message in agent.link.sent[1:]]
    assert opcodes == [("_query_response", "query-1")] and agent.answered == 2


def test_a_locate_whose_answer_fails_leaves_the_links_thread_running(agent, monkeypatch):
    """An exception there would end proton's container, and the agent with it, until the gateway restarts."""
    agent, reactor, _ = agent

    def refused(exchange, message):
        raise RuntimeError("no sender")

    monkeypatch.setattr(agent.link, "send", refused)
    agent._arrived(Message(reply_to="qmf.default.direct/console-reply", correlation_id="locate-2", body=[],
                           properties={"qmf.opcode": "_agent_locate_request", "method": "request"}))
    reactor.free()
    assert agent.answered == 1

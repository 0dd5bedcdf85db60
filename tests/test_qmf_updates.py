"""The agent's unsolicited data indications (gateway/qmf/updates.py): every qmf_update_interval, after its
heartbeat, the watched objects that changed and those that are gone, one message per class on the topic exchange.
In this process on the local backend, on a fake clock, with the broker link replaced by a recorder of what the agent
sends (the real broker and a real qmf.console receiving them: test_qmf.py)."""

from __future__ import annotations

import pytest
from twisted.internet.task import Clock

from backends.interface import ActionChange, Batch
from gateway.core.adstruct import Attr, AttrType
from gateway.core.auth import Authentication, Caller
from gateway.core.transactions import AdRules, NewCluster, WholeTransaction
from gateway.qmf.agent import QmfAgent
from gateway.qmf.settings import QmfSettings
from tests.qmf_queue import SCHEDD, ManyJobs
from tests.synchronous import run
from jobmodel.jobs import JobAction

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


@pytest.fixture
def agent(tmp_path):
    queue = ManyJobs(tmp_path, 2, 3)
    clock = Clock()
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

"""The low-latency service follows its jobs from polls that may overlap (a poll awaits each job's ad, and a delivery
or a final sent meanwhile schedules another): a job is looked at by one poll at a time, so its replies go once."""

from __future__ import annotations

from types import SimpleNamespace

import classad2
from twisted.internet.defer import Deferred, ensureDeferred
from twisted.internet.task import Clock

from gateway.core.auth import Authentication, Caller
from gateway.core.schedd import JobAdStruct
from gateway.core.submissions import JobRef
from gateway.lowlatency.codec import ReplyAddress
from gateway.lowlatency.service import LowLatencyService, Tracked
from gateway.lowlatency.settings import CarodSettings


class Schedd:
    """getJobAd answers when the test says so."""

    def __init__(self) -> None:
        self.asked: list[Deferred] = []

    def get_job_ad(self, caller, ref, cluster, proc) -> Deferred:
        self.asked.append(Deferred())
        return self.asked[-1]


class Submissions:
    settings = SimpleNamespace(output_retention=60)

    async def set_attribute(self, *args) -> None:
        return None


def test_overlapping_polls_look_at_a_job_once_and_send_its_final_once(tmp_path):
    schedd = Schedd()
    service = LowLatencyService(Clock(), CarodSettings(), Submissions(), schedd, None, tmp_path)
    service._gate = lambda: None  # (no broker here)
    sent: list[dict] = []

    async def send(tracked, headers, body, content_type) -> None:
        sent.append(headers)

    service._send = send
    ref = JobRef(7, 0)
    service._tracked[ref] = Tracked(ref, Caller("127.0.0.1", "alice", Authentication.SOCKET), "m-1",
                                    ReplyAddress("", "replies"))
    first = ensureDeferred(service._poll())  # waits for the job's ad
    second = ensureDeferred(service._poll())  # (scheduled meanwhile by a delivery, say)
    ad = classad2.ClassAd({"ClusterId": 7, "ProcId": 0, "JobStatus": 3})  # removed: its final is owed
    for asked in list(schedd.asked):
        asked.callback(JobAdStruct(ad, 0))
    assert first.called and second.called
    assert len(schedd.asked) == 1 and [headers["JobStatus"] for headers in sent] == [3]
    assert ref not in service._tracked

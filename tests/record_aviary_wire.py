"""Records the wire exchanges in tests/data/aviary/wire: each of the 13 Aviary operations called once by a zeep
client generated from the shipped WSDLs against a fresh gateway (run ``python -m tests.record_aviary_wire``; the
owner and working directory in the requests are written as @OWNER@ and @IWD@)."""

from __future__ import annotations

import getpass
import json
import tempfile
from pathlib import Path

import zeep
from lxml import etree
from zeep.plugins import HistoryPlugin

from gateway.testing import QUEUE_ONLY, GatewayProcess

WIRE = Path(__file__).resolve().parent / "data" / "aviary" / "wire"


def record() -> None:
    directory = Path(tempfile.mkdtemp())
    gateway = GatewayProcess(directory / "state", QUEUE_ONLY, tmp=directory).start()
    history = HistoryPlugin(maxlen=1)
    try:
        job = zeep.Client(gateway.url + "services/job?wsdl", plugins=[history]).service
        query = zeep.Client(gateway.url + "services/query?wsdl", plugins=[history]).service
        jid = {"job": "1.0"}
        calls = [
            ("job", "SubmitJob", lambda: job.submitJob(
                cmd="/bin/sleep", args="60", owner=getpass.getuser(), iwd=str(directory), submission_name="recorded",
                requirements=[{"type": "OS", "value": "LINUX"}, {"type": "MEMORY", "value": "512"}],
                extra=[{"name": "Answer", "type": "INTEGER", "value": "42"}])),
            ("job", "HoldJob", lambda: job.holdJob(id=jid, reason="recorded hold")),
            ("job", "ReleaseJob", lambda: job.releaseJob(id=jid, reason="recorded release")),
            ("job", "SuspendJob", lambda: job.suspendJob(id=jid, reason="recorded suspend")),
            ("job", "ContinueJob", lambda: job.continueJob(id=jid, reason="recorded continue")),
            ("job", "SetJobAttribute", lambda: job.setJobAttribute(id=jid, attribute={"name": "Answer",
                                                                                      "value": "43"})),
            ("query", "GetJobStatus", lambda: query.getJobStatus(ids=[jid, {"job": "99.0"}])),
            ("query", "GetJobSummary", lambda: query.getJobSummary(ids=[jid])),
            ("query", "GetJobDetails", lambda: query.getJobDetails(ids=[jid])),
            ("query", "GetJobData", lambda: query.getJobData(data={"id": jid, "type": "OUT"}, max_bytes=100)),
            ("query", "GetSubmissionSummary", lambda: query.getSubmissionSummary(ids=[{"name": "recorded"}])),
            ("query", "GetSubmissionID", lambda: query.getSubmissionID(size=10)),
            ("job", "RemoveJob", lambda: job.removeJob(id=jid, reason="recorded remove")),
        ]
        exchanges = []
        for service, operation, call in calls:
            call()
            sent, received = history.last_sent["envelope"], history.last_received["envelope"]
            request = etree.tostring(sent, encoding="unicode").replace(str(directory), "@IWD@") \
                .replace(f">{getpass.getuser()}<", ">@OWNER@<")
            (WIRE / f"{operation}.request.xml").write_text(request + "\n")
            (WIRE / f"{operation}.answer.xml").write_bytes(etree.tostring(received, encoding="UTF-8",
                                                                          xml_declaration=True) + b"\n")
            exchanges.append({"operation": operation, "path": f"services/{service}",
                              "request": f"{operation}.request.xml", "answer": f"{operation}.answer.xml"})
        (WIRE / "exchanges.json").write_text(json.dumps(exchanges, indent=1) + "\n")
    finally:
        gateway.stop()


if __name__ == "__main__":
    record()

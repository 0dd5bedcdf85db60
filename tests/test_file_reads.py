"""Reading a job's files is bounded per call as sending them is (``max_request_bytes``): getFile and the submission
API's fetch read at most that much at once, whatever length a client asks for, and say so when more is asked of a
file than that; a whole file within the bound, or the rest of one, is read as before.  Without the bound a client
asking for a large file in one call made the gateway hold it several times over (read, encoded, written), and with
workers the answer could not cross to the worker at all; both layouts now answer the same (the suite runs this
module against both)."""

from __future__ import annotations

import base64
import hashlib
import os

from gateway.testing import QUEUE_ONLY, zeep_client
from tests.birdbath import ad, begin, expr, new_job
from tests.conftest import module_gateway
from tests.test_submission_api import call

MOST = 65536
gateway = module_gateway(f"[gateway]\nmax_request_bytes = {MOST}\n" + QUEUE_ONLY)
#: what a client sends per call: within the request bound once encoded
PIECE = 16384


def test_get_file_reads_within_the_bound_and_refuses_more_at_once(gateway):
    schedd = zeep_client(gateway.url + "condorSchedd.wsdl", gateway.url)
    data = os.urandom(3 * MOST + 100)
    txn = begin(schedd)
    cluster, proc = new_job(schedd, txn)
    assert schedd.declareFile(txn, cluster, proc, "big.bin", len(data), "NOHASH", None).code == "SUCCESS"
    for offset in range(0, len(data), PIECE):
        assert schedd.sendFile(txn, cluster, proc, "big.bin", offset, data[offset:offset + PIECE]).code == "SUCCESS"
    assert schedd.submit(txn, cluster, proc, ad(Cmd="/bin/true", Requirements=expr("TRUE"))).status.code == "SUCCESS"
    assert schedd.commitTransaction(txn).code == "SUCCESS"

    whole = schedd.getFile(None, cluster, proc, "big.bin", 0, 2**31 - 1)
    assert whole.status.code == "FAIL" and "read it in pieces" in whole.status.message and not whole.data
    pieces = [schedd.getFile(None, cluster, proc, "big.bin", offset, MOST) for offset in range(0, len(data), MOST)]
    assert all(piece.status.code == "SUCCESS" for piece in pieces)
    assert b"".join(piece.data for piece in pieces) == data
    rest = schedd.getFile(None, cluster, proc, "big.bin", len(data) - 100, 2**31 - 1)  # what is left fits
    assert rest.status.code == "SUCCESS" and rest.data == data[-100:]


def test_fetch_reads_within_the_bound_and_refuses_more_at_once(gateway):
    staging = call(gateway, "create", submission="bounded")["id"]
    data = os.urandom(2 * MOST + 100)
    for offset in range(0, len(data), PIECE):
        last = offset + PIECE >= len(data)
        sent = call(gateway, "send", staging=staging, name="data.bin", offset=offset,
                    data=base64.b64encode(data[offset:offset + PIECE]).decode(),
                    md5=hashlib.md5(data).hexdigest() if last else None)
        assert sent["status"]["code"] == "OK", sent
    submitted = call(gateway, "submit", ad={"Cmd": "/bin/true", "Requirements": {"TYPE": 0, "VALUE": "TRUE"}},
                     staging=staging)
    assert submitted["status"]["code"] == "OK", submitted
    job = submitted["id"]

    whole = call(gateway, "fetch", id=job, file="data.bin", start=0, end=10**9)
    assert whole["status"]["code"] == "FAIL" and "fetch it in pieces" in whole["status"]["text"], whole
    first = call(gateway, "fetch", id=job, file="data.bin", start=0, end=MOST)
    assert first["status"]["code"] == "OK" and base64.b64decode(first["data"]) == data[:MOST]
    rest = call(gateway, "fetch", id=job, file="data.bin", start=-100, end=0)
    assert rest["status"]["code"] == "OK" and base64.b64decode(rest["data"]) == data[-100:]

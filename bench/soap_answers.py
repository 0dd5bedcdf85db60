"""How long a getJobAds answer takes to serialise: the codec's generic writer (``ClassAdStruct`` items as mappings)
against the job-ad writer (``adwriter``).

Prints the time per answer for N ads of M attributes each (same ads, same run) and the ratio, then the same
through a real gateway over HTTP (queue filled through SOAP, answers fetched with raw POSTs on one connection).
Run: ``python bench/soap_answers.py [--ads 100] [--attributes 30] [--http-jobs 1000]``.
"""

from __future__ import annotations

import argparse
import http.client
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("CONDOR_CONFIG", "/dev/null")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import classad2  # noqa: E402

from gateway.birdbath.schedd import job_ad_answers, schedd_service, struct  # noqa: E402
from gateway.core.adstruct import ad_to_struct  # noqa: E402


def sample_ads(count: int, attributes: int) -> list:
    ads = []
    for n in range(count):
        ad = classad2.ClassAd()
        for i in range(attributes):
            kind = i % 4
            ad[f"Attribute{i}"] = (f"value-{n}-{i}" if kind == 0 else n * i if kind == 1 else
                                   i / 3 if kind == 2 else classad2.ExprTree(f"Attribute{i - 1} > {n}"))
        ads.append(ad)
    return ads


def timed(function, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        function()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def in_process(ads_count: int, attributes: int, repeat: int) -> None:
    service = schedd_service()
    answers = job_ad_answers(service)
    ads = sample_ads(ads_count, attributes)
    ok = {"code": "SUCCESS", "message": "Success"}
    now = int(time.time())

    def generic() -> bytes:
        return service.write("getJobAds", {"status": ok, "classAdArray": [struct(ad_to_struct(ad, now)) for ad in ads]})

    def with_writer() -> bytes:
        return answers.write_job_ads(ads, now)

    assert generic() == with_writer()
    generic_s, writer_s = timed(generic, repeat), timed(with_writer, repeat)
    total = ads_count * (attributes + 3)
    print(f"serialise getJobAds, {ads_count} ads x {attributes + 3} attributes ({total} items), median of {repeat}:")
    print(f"  generic writer   : {generic_s * 1000:8.2f} ms  ({generic_s / total * 1e6:6.2f} us/attribute)")
    print(f"  job-ad writer    : {writer_s * 1000:8.2f} ms  ({writer_s / total * 1e6:6.2f} us/attribute)")
    print(f"  ratio            : {generic_s / writer_s:8.1f} x faster")


def over_http(jobs: int, repeat: int) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.conftest import GatewayProcess, zeep_client

    with tempfile.TemporaryDirectory() as tmp:
        gateway = GatewayProcess(Path(tmp) / "state", tmp=Path(tmp)).start()
        try:
            schedd = zeep_client(gateway.url + "condorSchedd.wsdl", gateway.url)
            txn = schedd.beginTransaction(600).transaction
            cluster = schedd.newCluster(txn).integer
            started = time.perf_counter()
            for _ in range(jobs):
                proc = schedd.newJob(txn, cluster).integer
                schedd.submit(txn, cluster, proc, {"item": [
                    {"name": "Cmd", "type": "STRING-ATTR", "value": "/bin/true"},
                    {"name": "Requirements", "type": "EXPRESSION-ATTR", "value": "TRUE"}]})
            schedd.commitTransaction(txn)
            fill = time.perf_counter() - started
            body = ('<s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/"><s:Body>'
                    '<c:getJobAds xmlns:c="urn:condor"><constraint>JobStatus == 1</constraint></c:getJobAds>'
                    '</s:Body></s:Envelope>').encode()
            connection = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=120)

            def query() -> None:
                connection.request("POST", "/", body, {"Content-Type": "text/xml; charset=utf-8"})
                response = connection.getresponse()
                assert response.status == 200
                response.read()

            seconds = timed(query, repeat)
            print(f"over HTTP: {jobs} jobs submitted in one transaction in {fill:.2f} s "
                  f"({jobs / fill:.0f} newJob+submit pairs/s)")
            print(f"  getJobAds of all {jobs} jobs: {seconds * 1000:.1f} ms (median of {repeat}), "
                  f"{seconds / jobs * 1e6:.1f} us/job")
        finally:
            gateway.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ads", type=int, default=100)
    parser.add_argument("--attributes", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--http-jobs", type=int, default=1000, help="0 skips the HTTP part")
    args = parser.parse_args()
    in_process(args.ads, args.attributes, args.repeat)
    if args.http_jobs:
        over_http(args.http_jobs, args.repeat)


if __name__ == "__main__":
    main()

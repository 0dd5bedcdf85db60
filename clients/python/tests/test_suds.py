"""gSOAP-era Python: suds, with the shipped 7.2.4 WSDL and the gateway's address (as the old scripts did)."""

from __future__ import annotations

from conftest import LEGACY_WSDL


def test_suds_submits_and_lists_a_job(gateway):
    from suds.client import Client

    client = Client(f"file://{LEGACY_WSDL}", location=gateway.url)
    schedd = client.service
    assert schedd.getVersionString().message.startswith("$CondorVersion:")
    txn = schedd.beginTransaction(60).transaction
    cluster = schedd.newCluster(txn).integer
    job = schedd.newJob(txn, cluster).integer
    ad = client.factory.create("ClassAdStruct")
    for name, kind, value in (("Cmd", "STRING-ATTR", "/bin/true"), ("Requirements", "EXPRESSION-ATTR", "FALSE"),
                              ("JobUniverse", "INTEGER-ATTR", "5")):
        item = client.factory.create("ClassAdStructAttr")
        item.name, item.type, item.value = name, kind, value
        ad.item.append(item)
    assert schedd.submit(txn, cluster, job, ad).status.code == "SUCCESS"
    assert schedd.commitTransaction(txn).code == "SUCCESS"
    found = schedd.getJobAds(None, f"ClusterId == {cluster}")
    attrs = {item.name: item.value for item in found.classAdArray.item[0].item}
    assert found.status.code == "SUCCESS" and attrs["Cmd"] == "/bin/true" and attrs["JobStatus"] == "1"
    template = schedd.createJobTemplate(cluster, job, "owner", 5, "/bin/true", None, None)  # numeric universe
    assert {i.name: i.value for i in template.classAd.item}["JobUniverse"] == "5"
    assert schedd.removeJob(None, cluster, job, "done", False).code == "SUCCESS"

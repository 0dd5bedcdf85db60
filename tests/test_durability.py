"""Transactions end to end: leases expire and roll back, several run at once, commits survive a crash."""

from __future__ import annotations

import getpass
import subprocess
import sys

from tests.birdbath import ad, begin, new_job, submit_job, values
from tests.conftest import QUEUE_ONLY, ROOT, zeep_client
from tests.test_execution import wait_until


def client(gateway):
    return zeep_client(gateway.url + "condorSchedd.wsdl", gateway.url)


def spool_of(gateway, cluster: int, proc: int):
    return gateway.state_dir / "spool" / str(cluster) / str(proc) / f"cluster{cluster}.proc{proc}.subproc0"


def jobs_in(schedd, cluster: int) -> list:
    array = schedd.getJobAds(None, f"ClusterId == {cluster}").classAdArray
    return list(array.item) if array is not None else []


def test_an_expired_transaction_is_rolled_back(gateway):
    """End to end, once: the 1 s lease of an idle transaction runs out in the real gateway and its job and spool go.
    Expiry, renewal and clamping themselves are tested on a fake clock in tests/test_leases.py."""
    schedd = client(gateway)
    txn = begin(schedd, duration=1)
    cluster, proc = new_job(schedd, txn)
    schedd.declareFile(txn, cluster, proc, "in", 1, "NOHASH", None)
    schedd.sendFile(txn, cluster, proc, "in", 0, b"x")
    assert schedd.submit(txn, cluster, proc, ad(Cmd="/bin/true")).status.code == "SUCCESS"
    spool = spool_of(gateway, cluster, proc)
    assert (spool / "in").exists()
    # poll without the transaction (a call carrying it would renew the lease)
    wait_until(lambda: f"transaction {txn.id} expired after 1s idle" in gateway.log() and not spool.exists(),
               timeout=15)
    assert schedd.commitTransaction(txn).code == "INVALIDTRANSACTION"
    assert jobs_in(schedd, cluster) == []


def test_concurrent_transactions_are_independent(gateway):
    schedd = client(gateway)
    first, second = begin(schedd), begin(schedd)
    c1, p1 = new_job(schedd, first)
    c2, p2 = new_job(schedd, second)
    assert c1 != c2
    assert schedd.newJob(first, c2).status.code == "FAIL"  # each transaction has its own active cluster
    schedd.submit(first, c1, p1, ad(Cmd="/bin/true", Tag="first"))
    schedd.submit(second, c2, p2, ad(Cmd="/bin/true", Tag="second"))
    assert schedd.abortTransaction(second).code == "SUCCESS"
    assert schedd.commitTransaction(first).code == "SUCCESS"
    assert [values(job)["Tag"] for job in jobs_in(schedd, c1)] == ["first"]
    assert jobs_in(schedd, c2) == []


def test_the_maximum_duration_clamps_begin_and_extend(start_gateway):
    schedd = client(start_gateway(QUEUE_ONLY + "[birdbath]\nmax_soap_transaction_duration = 30\n"))
    txn = schedd.beginTransaction(3600).transaction
    assert txn.duration == 30
    assert schedd.extendTransaction(txn, 7200).transaction.duration == 30


def test_trusted_queues_accept_any_owner(start_gateway):
    schedd = client(start_gateway(QUEUE_ONLY + "[birdbath]\nqueue_all_users_trusted = true\n"))
    cluster, proc = submit_job(schedd, Owner="alice")
    assert values(schedd.getJobAd(None, cluster, proc).classAd)["Owner"] == "alice"


def test_a_loopback_caller_owns_its_jobs_whatever_the_default_owner(start_gateway):
    """default_owner is for anonymous remote callers (tests/test_owners.py); on loopback the kernel names the user."""
    schedd = client(start_gateway(QUEUE_ONLY + '[birdbath]\ndefault_owner = "svc"\n'))
    cluster, proc = submit_job(schedd)
    assert values(schedd.getJobAd(None, cluster, proc).classAd)["Owner"] == getpass.getuser()


def test_committed_jobs_and_files_survive_a_crash_and_ids_never_repeat(start_gateway):
    gateway = start_gateway(QUEUE_ONLY)
    schedd = client(gateway)
    cluster, proc = submit_job(schedd, files={"data.bin": b"\x00\x01payload"}, Tag="durable")
    aborted = begin(schedd)
    aborted_cluster = schedd.newCluster(aborted).integer
    schedd.abortTransaction(aborted)
    pending = begin(schedd, duration=600)
    pending_cluster, pending_proc = new_job(schedd, pending)
    assert schedd.declareFile(pending, pending_cluster, pending_proc, "in", 0, "NOHASH", None).code == "SUCCESS"
    schedd.submit(pending, pending_cluster, pending_proc, ad(Cmd="/bin/true"))
    assert spool_of(gateway, pending_cluster, pending_proc).exists()  # (made for the file staged in it)

    gateway.kill()
    gateway.start()
    schedd = client(gateway)

    assert [values(job)["Tag"] for job in jobs_in(schedd, cluster)] == ["durable"]
    assert schedd.getFile(None, cluster, proc, "data.bin", 0, 100).data == b"\x00\x01payload"
    assert schedd.commitTransaction(pending).code == "INVALIDTRANSACTION"  # transactions die with the process
    assert jobs_in(schedd, pending_cluster) == []
    assert not spool_of(gateway, pending_cluster, pending_proc).exists()  # preened at start-up
    txn = begin(schedd)
    new_cluster = schedd.newCluster(txn).integer
    assert new_cluster > max(cluster, aborted_cluster, pending_cluster)
    schedd.abortTransaction(txn)


def test_a_clean_stop_rolls_back_open_transactions(start_gateway):
    gateway = start_gateway(QUEUE_ONLY)
    schedd = client(gateway)
    txn = begin(schedd, duration=600)
    cluster, proc = new_job(schedd, txn)
    schedd.submit(txn, cluster, proc, ad(Cmd="/bin/true"))
    gateway.restart()
    schedd = client(gateway)
    assert jobs_in(schedd, cluster) == []
    assert not spool_of(gateway, cluster, proc).exists()


def test_after_a_clean_stop_cluster_ids_go_on_from_the_last_one_used(start_gateway):
    """As condor_schedd's: the ids of the reserved block that no client got are not skipped (21, then 22; not 101)."""
    gateway = start_gateway(QUEUE_ONLY)
    schedd = client(gateway)
    txn = begin(schedd)
    first = schedd.newCluster(txn).integer
    second = schedd.newCluster(txn).integer
    schedd.commitTransaction(txn)
    gateway.restart()
    schedd = client(gateway)
    txn = begin(schedd)
    assert (first, second, schedd.newCluster(txn).integer) == (first, first + 1, first + 2)
    schedd.abortTransaction(txn)  # an aborted transaction's id is used all the same: never handed out again
    gateway.restart()
    schedd = client(gateway)
    txn = begin(schedd)
    assert schedd.newCluster(txn).integer == first + 3
    schedd.abortTransaction(txn)


def test_the_cli_reports_an_unknown_backend_with_the_installed_ones(tmp_path):
    result = subprocess.run([sys.executable, "-m", "gateway.cli", "--port", "auto", "--backend", "nosuch", "--state-dir",
                             str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "no backend named 'nosuch'; installed backends: htcondor, local" in result.stderr


def test_the_htcondor_backend_names_a_pool_it_cannot_reach(tmp_path):
    config = tmp_path / "gateway.toml"
    config.write_text('[gateway]\nbackend = "htcondor"\n[backends.htcondor]\ncollector = "127.0.0.1:9"\n')
    result = subprocess.run([sys.executable, "-m", "gateway.cli", "--port", "auto", "--config", str(config),
                             "--state-dir", str(tmp_path / "state")], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "cannot locate the schedd" in result.stderr and "127.0.0.1:9" in result.stderr


def test_the_cli_reports_a_bad_configuration(tmp_path):
    config = tmp_path / "gateway.toml"
    config.write_text("[gateway]\nport = 'eighty'\n")
    result = subprocess.run([sys.executable, "-m", "gateway.cli", "--port", "auto", "--config", str(config)], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "port: expected a port number" in result.stderr

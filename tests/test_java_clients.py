"""Java programs built on generated stubs (Axis 1.4 WSDL2Java and JAX-WS wsimport, each from our WSDL and from
the shipped 7.2.4 WSDL) submit real jobs and the diamond DAG against the running gateway, and abort their
transaction when a submission fails before its commit."""

from __future__ import annotations

import getpass
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from gateway.testing import GatewayProcess, TestPki
from tests.birdbath import expr, values
from tests.conftest import (
    LEGACY_COLLECTOR_WSDL,
    LEGACY_WSDL,
    QUEUE_ONLY,
    ROOT,
    module_gateway,
    require_java,
    zeep_client,
)
from tests.dags import write_dag
from tests.test_execution import RUNNER, submit

#: its tests start gateway processes of their own (the mark: gateway.testing.GATEWAY_MARK)
pytestmark = [pytest.mark.gateway, pytest.mark.java]

VARIANTS = ["axis-ours", "jaxws-ours", "axis-legacy", "jaxws-legacy"]


@pytest.fixture(scope="session")
def java_clients(tmp_path_factory) -> Path:
    require_java()
    out = tmp_path_factory.mktemp("java")
    subprocess.run([str(ROOT / "clients" / "java" / "build.sh"), str(out), f"ours={ROOT / 'wsdl' / 'condorSchedd.wsdl'}",
                    f"legacy={LEGACY_WSDL}"], check=True, capture_output=True, text=True, timeout=600)
    return out


gateway = module_gateway(RUNNER + "[birdbath]\nqueue_all_users_trusted = true\n")


@pytest.fixture(scope="module")
def schedd(gateway):
    return zeep_client(gateway.url + "condorSchedd.wsdl", gateway.url)


#: a gateway without queue super users: the test's user (identified by its socket) may not submit alice's jobs
strict_gateway = module_gateway(QUEUE_ONLY + "[birdbath]\nqueue_super_users = []\n")


@pytest.fixture(scope="module")
def strict_schedd(strict_gateway):
    return zeep_client(strict_gateway.url + "condorSchedd.wsdl", strict_gateway.url)


def run_java(java_clients: Path, variant: str, program: str, *args: str,
             jvm: tuple[str, ...] = (), program_package: str = "example") -> subprocess.CompletedProcess:
    classpath = (java_clients / variant / "classpath").read_text().strip()
    return subprocess.run(["java", *jvm, "-cp", classpath, f"{program_package}.{program}", *args], capture_output=True,
                          text=True, timeout=300, env=dict(os.environ))


@pytest.mark.parametrize("variant", VARIANTS)
def test_submit_a_job_with_an_input_file_and_fetch_its_output(java_clients, gateway, variant, tmp_path):
    program = tmp_path / "shout.sh"
    program.write_text('#!/bin/sh\ntr a-z A-Z < "$1" > shouted.txt\necho "read $1"\nexit 3\n')
    (tmp_path / "words.txt").write_bytes(b"binary \x00\xff and text\n" * 500)
    result = run_java(java_clients, variant, "SubmitJob", gateway.url, str(program), str(tmp_path / "words.txt"),
                      str(tmp_path / "out"))
    assert result.returncode == 3, result.stdout + result.stderr
    assert (tmp_path / "out" / "shouted.txt").read_bytes() == b"BINARY \x00\xff AND TEXT\n" * 500
    assert (tmp_path / "out" / "job.out").read_text() == "read words.txt\n"
    assert "exited with 3" in result.stdout


@pytest.mark.parametrize("variant", VARIANTS)
def test_submit_the_diamond_dag_like_the_blog(java_clients, gateway, variant, tmp_path):
    diamond = "JOB A A.sub\nJOB B B.sub\nJOB C C.sub\nJOB D D.sub\nPARENT A CHILD B C\nPARENT B C CHILD D\n"
    dag = write_dag(tmp_path, diamond, {node: f"echo {node} >> {tmp_path}/order" for node in "ABCD"},
                    name="diamond.dag")
    result = run_java(java_clients, variant, "SubmitDag", gateway.url, getpass.getuser(), str(dag))
    assert result.returncode == 0, result.stdout + result.stderr
    order = (tmp_path / "order").read_text().split()
    assert order[0] == "A" and order[-1] == "D" and sorted(order[1:3]) == ["B", "C"]
    assert "All jobs Completed!" in Path(f"{dag}.dagman.out").read_text()


@pytest.mark.parametrize("variant", VARIANTS)
def test_list_jobs_with_a_constraint(java_clients, schedd, gateway, variant):
    keys = submit(schedd, procs=2, Cmd="/bin/true", Requirements=expr("FALSE"), Tag=variant)
    result = run_java(java_clients, variant, "ListJobs", gateway.url, f'Tag == "{variant}"')
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert sorted(line.split()[0] for line in lines[:-1]) == sorted(f"{c}.{p}" for c, p in keys)
    assert all(line.split()[1] == "1" for line in lines[:-1]) and lines[-1] == "2 jobs"
    schedd.removeCluster(None, keys[0][0], "done")


@pytest.mark.parametrize("variant", VARIANTS)
def test_hold_release_and_remove(java_clients, schedd, gateway, variant):
    ((cluster, proc),) = submit(schedd, Cmd="/bin/true", Requirements=expr("FALSE"))
    for action, status in (("hold", "5"), ("release", "1"), ("remove", "3")):
        result = run_java(java_clients, variant, "ControlJob", gateway.url, action, str(cluster), str(proc),
                          f"{action} from Java")
        assert result.returncode == 0, result.stdout + result.stderr
        assert values(schedd.getJobAd(None, cluster, proc).classAd)["JobStatus"] == status
    held_twice = run_java(java_clients, variant, "ControlJob", gateway.url, "release", str(cluster), str(proc), "x")
    assert held_twice.returncode != 0 and "Failed to release job." in held_twice.stderr


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("program", ["SubmitDag", "SubmitJob"])
def test_a_submission_that_fails_aborts_its_transaction(java_clients, strict_gateway, strict_schedd, variant,
                                                        program, tmp_path):
    if program == "SubmitDag":  # the gateway refuses the Owner at submit
        dag = write_dag(tmp_path, "JOB A A.sub\n", {"A": "true"}, name="refused.dag")
        args, failure = ("alice", str(dag)), "may not submit jobs owned by 'alice'"
    else:  # the client fails half way through spooling: the program is sent, the input is a directory
        (tmp_path / "job.sh").write_text("#!/bin/sh\ntrue\n")
        (tmp_path / "input").mkdir()
        args, failure = (str(tmp_path / "job.sh"), str(tmp_path / "input"), str(tmp_path / "out")), "Is a directory"
    result = run_java(java_clients, variant, program, strict_gateway.url, *args)
    assert result.returncode != 0 and failure in result.stderr, result.stdout + result.stderr
    aborted = re.findall(r"^aborted transaction (\d+)$", result.stderr, re.MULTILINE)
    assert len(aborted) == 1, result.stderr
    # An open transaction (its 60 s lease has not run out) would answer SUCCESS.
    answer = strict_schedd.extendTransaction({"id": int(aborted[0]), "duration": 60}, 60)
    assert answer.status.code == "INVALIDTRANSACTION"


# -- over TLS -------------------------------------------------------------------------------------------------------
#: who the client certificate (and the password file) says the Java programs are; as root the gateway runs their
#: jobs as that account, so it must exist and differ from the gateway's own user
TLS_USER = "nobody" if os.geteuid() == 0 else getpass.getuser()
STORE_PASSWORD = "changeit"


@pytest.fixture(scope="module")
def pki():
    """A test CA, the gateway's key and a client certificate for TLS_USER, in a directory every user can traverse
    (the jobs of TLS_USER run in the gateway's state directory below it)."""
    directory = Path(tempfile.mkdtemp(prefix="birdbath-java-tls-", dir="/tmp"))
    directory.chmod(0o755)
    yield TestPki(directory / "pki")
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def tls_gateway(pki):
    pki.passwords({TLS_USER: "s3cret word"})
    process = GatewayProcess(pki.directory.parent / "state", RUNNER + pki.config(passwords=True), tmp=pki.directory,
                             ssl=True, plain=False).start()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def java_stores(pki) -> dict[str, Path]:
    """JSSE stores: a PKCS#12 key store with the client's key and certificate, a trust store with the test CA."""
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.serialization import pkcs12
    from cryptography.x509 import load_pem_x509_certificate

    # with a subjectAltName (an e-mail address): JSSE cannot parse a certificate whose SAN extension is empty, and
    # says so as "keystore password was incorrect"
    leaf = pki.ca.issue_cert(f"{TLS_USER}@birdbath.test", common_name=TLS_USER, organization_name=pki.ORGANIZATION,
                             organization_unit_name="People")
    key = serialization.load_pem_private_key(leaf.private_key_pem.bytes(), None)
    certificate = load_pem_x509_certificate(leaf.cert_chain_pems[0].bytes())
    keystore = pki.directory / "client.p12"
    # SHA-1/3DES: what every JSSE reads (the newest defaults of cryptography are not read by all JDKs)
    encryption = (serialization.PrivateFormat.PKCS12.encryption_builder()
                  .key_cert_algorithm(pkcs12.PBES.PBESv1SHA1And3KeyTripleDESCBC).hmac_hash(hashes.SHA1())
                  .build(STORE_PASSWORD.encode()))
    keystore.write_bytes(pkcs12.serialize_key_and_certificates(b"client", key, certificate, None, encryption))
    truststore = pki.directory / "trust.p12"
    subprocess.run(["keytool", "-importcert", "-noprompt", "-alias", "birdbath-test-ca", "-file", str(pki.ca_file),
                    "-keystore", str(truststore), "-storetype", "PKCS12", "-storepass", STORE_PASSWORD],
                   check=True, capture_output=True, timeout=120)
    return {"keystore": keystore, "truststore": truststore}


def jsse(stores: dict[str, Path], *, certificate: bool) -> tuple[str, ...]:
    """The JVM's system properties for TLS: always trust the test CA, present the client certificate if asked."""
    options = [f"-Djavax.net.ssl.trustStore={stores['truststore']}", "-Djavax.net.ssl.trustStoreType=PKCS12",
               f"-Djavax.net.ssl.trustStorePassword={STORE_PASSWORD}"]
    if certificate:
        options += [f"-Djavax.net.ssl.keyStore={stores['keystore']}", "-Djavax.net.ssl.keyStoreType=PKCS12",
                    f"-Djavax.net.ssl.keyStorePassword={STORE_PASSWORD}"]
    return tuple(options)


def submit_over_tls(java_clients: Path, gateway: GatewayProcess, variant: str, tmp_path: Path,
                    jvm: tuple[str, ...]) -> subprocess.CompletedProcess:
    program = tmp_path / "whoami.sh"
    program.write_text('#!/bin/sh\nid -un\ncat "$1"\n')
    (tmp_path / "in.txt").write_text("over TLS\n")
    # by name: Debian's Axis 1.4 matches the host against the certificate's DNS names only, not its IP address
    url = gateway.https_url.replace("127.0.0.1", "localhost")
    return run_java(java_clients, variant, "SubmitJob", url, str(program), str(tmp_path / "in.txt"),
                    str(tmp_path / "out"), jvm=jvm)


@pytest.mark.parametrize("variant", ["axis-legacy", "jaxws-ours"])
def test_mutual_tls_submits_and_reads_a_job_as_the_certificate_s_user(java_clients, tls_gateway, java_stores,
                                                                      variant, tmp_path):
    result = submit_over_tls(java_clients, tls_gateway, variant, tmp_path, jsse(java_stores, certificate=True))
    assert result.returncode == 0, result.stdout + result.stderr
    # the job ran as the user the certificate's subject maps to, and its output came back over TLS
    assert (tmp_path / "out" / "job.out").read_text() == f"{TLS_USER}\nover TLS\n"
    assert "commitTransaction from 127.0.0.1: SUCCESS" in tls_gateway.log()
    assert f"({TLS_USER} by certificate)" in tls_gateway.log()


@pytest.mark.parametrize("variant", ["axis-ours", "jaxws-legacy"])
def test_http_basic_over_tls_from_java(java_clients, tls_gateway, java_stores, variant, tmp_path):
    login = ("-Dbirdbath.username=" + TLS_USER, "-Dbirdbath.password=s3cret word")
    result = submit_over_tls(java_clients, tls_gateway, variant, tmp_path, jsse(java_stores, certificate=False) + login)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "out" / "job.out").read_text() == f"{TLS_USER}\nover TLS\n"
    assert f"({TLS_USER} by password)" in tls_gateway.log()
    wrong = ("-Dbirdbath.username=" + TLS_USER, "-Dbirdbath.password=guess")
    refused = submit_over_tls(java_clients, tls_gateway, variant, tmp_path, jsse(java_stores, certificate=False) + wrong)
    assert refused.returncode != 0 and "401" in refused.stdout + refused.stderr


def test_without_a_certificate_or_password_java_is_refused(java_clients, tls_gateway, java_stores, tmp_path):
    result = submit_over_tls(java_clients, tls_gateway, "jaxws-ours", tmp_path, jsse(java_stores, certificate=False))
    assert result.returncode != 0 and "401" in result.stdout + result.stderr


# -- the condorCollector programs (clients/java/<stack>/collector) ----------------------------------------------
COLLECTOR_VARIANTS = ["axis-collector", "jaxws-collector", "axis-collector-legacy", "jaxws-collector-legacy"]


@pytest.fixture(scope="session")
def java_collector_clients(tmp_path_factory) -> Path:
    require_java()
    out = tmp_path_factory.mktemp("java-collector")
    subprocess.run([str(ROOT / "clients" / "java" / "build.sh"), str(out),
                    f"collector={ROOT / 'wsdl' / 'condorCollector.wsdl'}", f"collector-legacy={LEGACY_COLLECTOR_WSDL}"],
                   check=True, capture_output=True, text=True, timeout=600)
    return out


@pytest.mark.parametrize("variant", COLLECTOR_VARIANTS)
def test_query_the_pool_and_advertise_a_machine(java_collector_clients, gateway, variant):
    machines = run_java(java_collector_clients, variant, "QueryPool", gateway.url, "startd",
                        'PartitionableSlot =?= true', program_package="collector")
    assert machines.returncode == 0, machines.stdout + machines.stderr
    lines = machines.stdout.splitlines()
    assert lines[-1] == "1 ads" and lines[0].startswith("Machine slot1@") and lines[0].endswith(" Unclaimed")
    schedds = run_java(java_collector_clients, variant, "QueryPool", gateway.url, "schedd", "HasSOAPInterface",
                       program_package="collector")
    assert schedds.stdout.splitlines()[-1] == "1 ads" and schedds.stdout.startswith("Scheduler ")

    name = f"vm-{variant}-{os.getpid()}"
    advertised = run_java(java_collector_clients, variant, "QueryPool", gateway.url, "advertise", "STARTD-AD-TYPE",
                          name, program_package="collector")
    assert advertised.returncode == 0 and advertised.stdout.strip() == "SUCCESS New ad inserted", advertised.stderr
    found = run_java(java_collector_clients, variant, "QueryPool", gateway.url, "any", f'Name == "{name}"',
                     program_package="collector")
    assert found.stdout.splitlines() == [f"Machine {name} null", "1 ads"]
    refused = run_java(java_collector_clients, variant, "QueryPool", gateway.url, "advertise", "SCHEDD-AD-TYPE", "",
                       program_package="collector")
    assert refused.returncode == 1 and refused.stdout.startswith("FAIL "), refused.stdout + refused.stderr


# -- command lines: a usage line, never an exception -------------------------------------------------------------
BAD_COMMAND_LINES = [
    ("ControlJob", [], "too few arguments"),
    ("ControlJob", ["URL", "hold", "1", "0"], "too few arguments"),
    ("ControlJob", ["URL", "hold", "1", "0", "why", "extra"], "too many arguments"),
    ("ControlJob", ["URL", "freeze", "1", "0", "why"], "the action must be one of hold, release, remove, not 'freeze'"),
    ("ControlJob", ["URL", "hold", "1.0", "0", "why"], "CLUSTER must be a whole number, not '1.0'"),
    ("ControlJob", ["URL", "hold", "1", "x", "why"], "PROC must be a whole number, not 'x'"),
    ("ControlJob", ["localhost:1984", "hold", "1", "0", "why"], "URL must be the gateway's http:// or https:// address"),
    ("ListJobs", [], "too few arguments"),
    ("ListJobs", ["not a url"], "URL must be the gateway's http:// or https:// address, not 'not a url'"),
    ("ListJobs", ["http://127.0.0.1:1/", "true", "more"], "too many arguments"),
    ("SubmitJob", ["URL", "/no/such/program", "in", "out"], "PROGRAM '/no/such/program' does not exist"),
    ("SubmitJob", ["URL", "/bin/sh", "/no/such/input", "out"], "INPUT '/no/such/input' does not exist"),
    ("SubmitDag", ["URL", "alice"], "too few arguments"),
    ("SubmitDag", ["URL", "alice", "/no/such.dag"], "DAG-FILE '/no/such.dag' does not exist"),
]
BAD_POOL_QUERIES = [
    ([], "too few arguments"),
    (["http://127.0.0.1:1/"], "too few arguments"),
    (["http://127.0.0.1:1/", "machines"], "KIND must be one of startd, schedd"),
    (["http://127.0.0.1:1/", "advertise", "STARTD-AD-TYPE"], "advertise takes a TYPE and a NAME"),
    (["http://127.0.0.1:1/", "startd", "true", "extra"], "too many arguments"),
    (["http://127.0.0.1:1/", "advertise", "MACHINE", "vm1"], "TYPE must be a ClassAdType such as STARTD-AD-TYPE"),
    (["ftp://pool/", "startd"], "URL must be the gateway's http:// or https:// address, not 'ftp://pool/'"),
]


def assert_usage(result: subprocess.CompletedProcess, program: str, problem: str) -> None:
    """Exit status 2, the problem and the usage line on stderr, nothing sent (nothing on stdout), no stack trace."""
    lines = result.stderr.splitlines()
    assert result.returncode == 2 and result.stdout == "", (result.returncode, result.stdout, result.stderr)
    assert len(lines) == 2 and lines[0].startswith(f"{program}: {problem}"), lines
    assert lines[1].startswith(f"usage: {program} URL "), lines


@pytest.mark.parametrize("variant", ["axis-ours", "jaxws-legacy"])
def test_a_wrong_command_line_prints_the_usage_line_and_exits_2(java_clients, variant, tmp_path):
    for program, args, problem in BAD_COMMAND_LINES:
        assert_usage(run_java(java_clients, variant, program, *args), program, problem)
    helped = run_java(java_clients, variant, "ListJobs", "--help")
    assert (helped.returncode, helped.stdout, helped.stderr) == (0, "usage: ListJobs URL [CONSTRAINT]\n", "")


@pytest.mark.parametrize("variant", ["axis-collector", "jaxws-collector-legacy"])
def test_a_wrong_pool_query_prints_the_usage_line_and_exits_2(java_collector_clients, variant):
    for args, problem in BAD_POOL_QUERIES:
        assert_usage(run_java(java_collector_clients, variant, "QueryPool", *args, program_package="collector"),
                     "QueryPool", problem)

"""Every example in README.md runs as written against a real gateway, so an example that stops working fails CI.

Each fenced block of the README is preceded by ``<!-- example: NAME -->`` and run by the runner of that name below
(tox environment ``readme``).  The only changes made to a block before it runs are the gateway's address (the README
says ``http://127.0.0.1:1984``, a test gateway listens on a free port) and scratch paths (``/tmp/java``, the state
directory), so that runs cannot collide.  A block without a runner, or a runner without a block, fails the suite.
"""

from __future__ import annotations

import getpass
import json
import os
import re
import shutil
import signal
import ssl
import stat
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
import zeep

from backends.interface import ENTRY_POINT_GROUP
from gateway.config import load
from gateway.core.auth import LOOPBACK, HostList
from gateway.testing import GatewayProcess
from tests.conftest import ROOT, module_gateway, require_java
from tests.test_logging import wait_for_line
from tests.test_packaging import SKIP

#: its tests start gateway processes of their own (the mark: gateway.testing.GATEWAY_MARK)
pytestmark = [pytest.mark.gateway, pytest.mark.readme]

README = ROOT / "README.md"
README_URL = "http://127.0.0.1:1984"
EXAMPLE = re.compile(r"<!-- example: (?P<name>[\w-]+) -->\n```(?P<lang>\w*)\n(?P<body>.*?)\n```", re.S)


@dataclass(frozen=True)
class Example:
    name: str
    lang: str
    body: str

    def at(self, url: str) -> str:
        """The block with the README's gateway address replaced by a test gateway's."""
        return self.body.replace(README_URL, url.rstrip("/"))


def examples() -> dict[str, Example]:
    text = README.read_text()
    found = [Example(m["name"], m["lang"], m["body"]) for m in EXAMPLE.finditer(text)]
    assert len({e.name for e in found}) == len(found), "two README examples share a name"
    return {example.name: example for example in found}


RUNNERS: dict[str, Callable[..., None]] = {}


def runs(name: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    def register(function: Callable[..., None]) -> Callable[..., None]:
        RUNNERS[name] = function
        return function
    return register


#: the README's examples assume the defaults, so the shared gateway has no configuration at all
gateway = module_gateway(None)


def run(command: list[str], cwd: Path, timeout: float = 300, **env: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                            env=dict(os.environ, **env))
    assert result.returncode == 0, f"{command[:2]} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
    return result


def run_python(code: str, cwd: Path) -> str:
    return run([sys.executable, "-c", code], cwd).stdout


def run_sh(script: str, cwd: Path, **env: str) -> str:
    return run(["bash", "-euo", "pipefail", "-c", script], cwd, **env).stdout


# -- the README as a whole ---------------------------------------------------------------------------------
def test_every_code_block_is_a_named_example_with_a_runner():
    fences = [line for line in README.read_text().splitlines() if line.startswith("```")]
    assert len(fences) % 2 == 0
    assert len(fences) // 2 == len(examples()), "a README code block has no <!-- example: NAME --> marker"
    assert set(examples()) == set(RUNNERS), "README examples and runners differ"


REPO_PATH = re.compile(r"(?<![\w/.-])((?:gateway|backends|clients|tests|wsdl|bench)/[\w./-]*[\w/])")


def test_paths_the_readme_names_exist():
    text = README.read_text()
    links = re.findall(r"\]\(([^)#]+)\)", text)
    missing = [path for path in links + REPO_PATH.findall(text)
               if not path.startswith("http") and not (ROOT / path).exists()]
    assert not missing, f"README.md names files the repository does not have: {sorted(set(missing))}"


@pytest.mark.parametrize("name", sorted(examples()))
def test_readme_example(name, request):
    function = RUNNERS[name]
    fixtures = [request.getfixturevalue(arg) for arg in function.__code__.co_varnames[1:function.__code__.co_argcount]]
    function(examples()[name], *fixtures)


# -- the runners -------------------------------------------------------------------------------------------
@runs("dev")
def dev_commands(example: Example, tmp_path: Path) -> None:
    """``./dev serve`` really installs and serves; ``./dev test`` is what CI runs (.ci/run), so it runs there."""
    commands = [line.split("#")[0].strip() for line in example.body.splitlines()]
    assert commands == ["./dev serve", "./dev test"]
    assert "exec ./dev test" in (ROOT / ".ci" / "run").read_text()
    port_file = tmp_path / "port"
    with open(tmp_path / "serve.log", "wb") as log:
        process = subprocess.Popen(["./dev", "serve", "--port", "auto", "--port-file", str(port_file),
                                    "--state-dir", str(tmp_path / "state")], cwd=ROOT, stdout=log,
                                   stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 600  # a first run installs the gateway into .venv
        while not (port_file.exists() and port_file.read_text().strip()):
            assert process.poll() is None, (tmp_path / "serve.log").read_text()
            assert time.monotonic() < deadline, "./dev serve did not start"
            time.sleep(0.2)
        url = f"http://127.0.0.1:{port_file.read_text().strip()}/condorSchedd.wsdl"
        assert b"condorSchedd" in urllib.request.urlopen(url, timeout=30).read()
        assert (ROOT / ".venv" / "bin" / "birdbath").exists()  # the client's command, for the examples that follow
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0


def test_dev_serve_installs_only_when_a_pyproject_changes(tmp_path):
    """A developer restarts the gateway many times a day: ``./dev serve`` installs (editable, saying so, with pip's
    steps) on the first start and after a pyproject.toml changed, and otherwise starts at once; an install that
    fails is tried again at the next start."""
    checkout = tmp_path / "checkout"
    shutil.copytree(ROOT, checkout, ignore=SKIP)
    env = {**os.environ, "VENV": str(tmp_path / "venv")}

    def serve() -> subprocess.CompletedProcess[str]:
        return subprocess.run(["./dev", "serve", "--version"], cwd=checkout, env=env, capture_output=True, text=True,
                              timeout=900, check=False)

    first, again = serve(), serve()
    assert first.returncode == 0 and "dev: installing" in first.stderr, first.stderr
    assert re.search(r"^Successfully installed .*birdbath-gateway", first.stderr, re.MULTILINE), first.stderr
    assert "Requirement already satisfied" not in first.stderr  # pip's steps, not its pages of requirements
    gateway_build = first.stderr.split("Obtaining file://")[1]  # (up to the client's: its pyproject.toml is its own)
    assert gateway_build.startswith(str(checkout)) and "Warning" not in gateway_build, gateway_build
    assert again.returncode == 0 and again.stdout.startswith("birdbath-gateway ") and again.stderr == ""
    (checkout / "clients" / "python" / "birdbath_client" / "added.py").write_text("")  # code: editable, no install
    assert serve().stderr == ""
    pyproject = checkout / "pyproject.toml"
    text = pyproject.read_text()
    pyproject.write_text(text.replace("[project]", "[project", 1))  # broken: the install fails, and is tried again
    broken = serve()
    assert broken.returncode != 0 and "dev: the install failed" in broken.stderr
    pyproject.write_text(text + "# changed\n")
    changed = serve()
    assert changed.returncode == 0 and "dev: installing" in changed.stderr and changed.stdout.startswith("birdbath")
    assert serve().stderr == ""


@runs("zeep-birdbath")
def zeep_birdbath(example: Example, gateway: GatewayProcess, tmp_path: Path) -> None:
    assert run_python(example.at(gateway.url), tmp_path).splitlines() == ["exit code 0"]


@runs("client-library")
def client_library(example: Example, gateway: GatewayProcess, tmp_path: Path) -> None:
    output = run_python(example.at(gateway.url), tmp_path)
    assert re.search(r"^exit code 0 output\s+1\s+6\s+19 input.txt$", output, re.M), output
    assert (tmp_path / "out" / "wc.out").exists() and (tmp_path / "out" / "input.txt").exists()


@runs("zeep-submission")
def zeep_submission(example: Example, gateway: GatewayProcess, tmp_path: Path) -> None:
    output = run_python(example.at(gateway.url), tmp_path)
    assert re.fullmatch(r"b'\s+1\s+2\s+11\\n'\n", output), output


@runs("zeep-aviary")
def zeep_aviary(example: Example, start_gateway: Callable[..., GatewayProcess], tmp_path: Path) -> None:
    """On a fresh gateway, as the README's comment says: the first job is 1.0."""
    output = run_python(example.at(start_gateway().url), tmp_path)
    assert output == "OK 1.0\nHELD\n1\n", output


@runs("zeep-aviary-pages")
def zeep_aviary_pages(example: Example, start_gateway: Callable[..., GatewayProcess], tmp_path: Path) -> None:
    """On a fresh gateway with 23 submissions (most of them in the same second): each printed once, newest first."""
    gateway = start_gateway()
    job = zeep.Client(gateway.url + "services/job?wsdl").service
    names = [f"nightly-{n:02}" for n in range(23)]
    for name in names:
        answer = job.submitJob(cmd="/bin/true", owner=getpass.getuser(), iwd=str(tmp_path), submission_name=name)
        assert answer.status.code == "OK", answer
    lines = [line.split() for line in run_python(example.at(gateway.url), tmp_path).splitlines()]
    assert sorted(name for _, name, _ in lines) == names and len(lines) == len(names)
    assert [(int(qdate), name) for qdate, name, _ in lines] == sorted(((int(q), n) for q, n, _ in lines), reverse=True)


@runs("curl")
def curl(example: Example, gateway: GatewayProcess, tmp_path: Path) -> None:
    """On the shared gateway, whatever ids it gave before: the second request asks for the id the first got."""
    submitted, job, submissions = run_sh(example.at(gateway.url), tmp_path).splitlines()
    found = re.fullmatch(r'\{"status": \{"code": "OK", "text": "OK"\}, "id": "[^"#]+#(\d+)\.0"\}', submitted)
    assert found, submitted
    assert '"code": "OK"' in job and '"Cmd": {"TYPE": 3, "VALUE": "/bin/sleep"}' in job
    assert f'"ClusterId": {{"TYPE": 1, "VALUE": "{found[1]}"}}' in job
    assert '"code": "OK"' in submissions


@runs("rest-curl")
def rest_curl(example: Example, gateway: GatewayProcess, tmp_path: Path) -> None:
    """The REST session on the shared gateway (whatever ids it gives): each line answers as its comment says."""
    lines = run_sh(example.at(gateway.url), tmp_path).splitlines()
    assert len(lines) == 13, lines
    contract, made, uploaded, output, listed, patched, held, released, removed, history, pool, dag, missing = lines
    assert contract.startswith('{"openapi": "3.1.0"')
    made = json.loads(made)
    assert made["job_ids"] == made["awaiting_input"] == [f"{made['cluster_id']}.0"]
    assert json.loads(uploaded)["queued"] == made["job_ids"]
    assert output == "hello REST"
    assert {"ClusterId": made["cluster_id"], "ProcId": 0, "Cmd": "hello.sh"} in json.loads(listed)["jobs"]
    for answer in (patched, held, released, removed):
        assert set(json.loads(answer)) == {"message", "job_id"}, answer
    assert json.loads(history)["jobs"][0]["RemoveReason"] == "changed my mind"
    assert json.loads(pool)["ads"] and all(set(ad) == {"Name", "Cpus", "Memory"} for ad in json.loads(pool)["ads"])
    assert json.loads(dag)["awaiting_input"] == [] and len(json.loads(dag)["job_ids"]) == 1
    assert json.loads(missing)["status"] == 404


@runs("cli")
def cli(example: Example, gateway: GatewayProcess, tmp_path: Path) -> None:
    """The session as the README's comments tell it, on the shared gateway (its clusters are whatever they are)."""
    lines = run_sh(example.at(gateway.url), tmp_path).splitlines()
    job = re.fullmatch(r"job (\d+)\.0: Completed, exit code 3", lines[0])
    assert job, lines
    first = int(job[1])
    assert lines[1:3] == ["exit status 3", "0 4 3"]
    assert lines[3] == (f"1 completed job(s) kept in the queue for their output ({first}.0): 'birdbath fetch ID DIR "
                        f"-close' or 'birdbath rm ID' lets one leave.")
    assert sorted(lines[4:6]) == ["out/hello.out", "out/sh"]
    sleepers = int(lines[8].split()[4])
    assert sleepers > first
    assert lines[6:] == ["hello", "3", f"All jobs in cluster {sleepers} have been held.", "0 not now", "1 not now",
                         f"All jobs in cluster {sleepers} have been marked for removal."]


def write_config(example: Example, tmp_path: Path) -> Path:
    path = tmp_path / "gateway.toml"
    path.write_text(example.body.replace("/var/lib/birdbath-gateway", str(tmp_path / "state")))
    return path


def start_configured(path: Path, tmp_path: Path) -> GatewayProcess:
    process = GatewayProcess(tmp_path / "state", tmp=tmp_path, extra_args=("--config", str(path)))
    return process.start()


@runs("config")
def config(example: Example, tmp_path: Path) -> None:
    """Consistent (listening beyond loopback, it lets more than loopback in), safe to copy (anonymous callers'
    jobs belong to an unprivileged account, no job runs as root) and accepted by a real gateway."""
    path = write_config(example, tmp_path)
    settings = load(path)
    assert settings.default_owner == "nobody"
    assert "root" in settings.backend_options["local"]["denied_owners"]
    if settings.listen not in ("127.0.0.1", "::1", "localhost"):
        beyond_loopback = [entry for entry in settings.allow_soap if entry not in LOOPBACK]
        assert beyond_loopback, "listens beyond loopback but lets only loopback clients in"
        HostList(settings.allow_soap)
    process = start_configured(path, tmp_path)
    try:
        assert b"condorSchedd" in urllib.request.urlopen(process.url + "condorSchedd.wsdl", timeout=30).read()
    finally:
        process.stop()


@runs("config-local")
def config_local(example: Example, tmp_path: Path) -> None:
    process = start_configured(write_config(example, tmp_path), tmp_path)
    process.stop()
    assert process.process.returncode == 0


@runs("config-htcondor")
def config_htcondor(example: Example, tmp_path: Path) -> None:
    """Only parsed: starting it needs a pool (see the htcondor backend's section)."""
    settings = load(write_config(example, tmp_path))
    assert settings.backend == "htcondor"
    assert set(settings.backend_options["htcondor"]) == {"collector", "schedd_name"}


@runs("plugin-entry-point")
def plugin_entry_point(example: Example) -> None:
    project = tomllib.loads(example.body)["project"]
    assert list(project["entry-points"]) == [ENTRY_POINT_GROUP]


@runs("layout")
def layout(example: Example) -> None:
    named = [line.split()[0] for line in example.body.splitlines() if line and not line.startswith(" ")]
    missing = [path for path in named if not (ROOT / path).exists()]
    assert not missing, f"the layout names what the tree does not have: {missing}"
    modules = {str(path.relative_to(ROOT)) for top in ("jobmodel", "gateway", "backends")
               for path in (ROOT / top).rglob("*.py") if path.name != "__init__.py"}
    assert not modules - set(named), f"modules the layout does not describe: {sorted(modules - set(named))}"


# -- monitoring: the pages answer as shown; the scrape configuration and the alert rules read what /metrics serves ---
@runs("monitoring-curl")
def monitoring_curl(example: Example, gateway: GatewayProcess, tmp_path: Path) -> None:
    output = run_sh(example.at(gateway.url), tmp_path).splitlines()
    assert json.loads(output[0]) == {"status": "ok"} and json.loads(output[1]) == {"ready": True, "problems": []}
    assert 'birdbath_jobs{state="idle"}' in " ".join(output[2:])


def served_metric_names(gateway: GatewayProcess) -> set[str]:
    """The names of the families and samples a gateway's /metrics serves."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(gateway.url + "metrics") as answer:
        families = list(text_string_to_metric_families(answer.read().decode()))
    return {family.name for family in families} | {sample.name for family in families for sample in family.samples}


@runs("prometheus-scrape")
def prometheus_scrape(example: Example, gateway: GatewayProcess) -> None:
    import yaml

    job, = yaml.safe_load(example.body)["scrape_configs"]
    target, = job["static_configs"][0]["targets"]
    assert target.endswith(":1984")  # the gateway's default port
    with urllib.request.urlopen(gateway.url.rstrip("/") + job["metrics_path"]) as answer:
        assert answer.status == 200 and answer.headers["content-type"].startswith("text/plain; version=")


@runs("prometheus-alerts")
def prometheus_alerts(example: Example, gateway: GatewayProcess) -> None:
    """Every metric a rule reads is one the gateway serves (a renamed metric would silence the alert)."""
    import yaml

    rules = yaml.safe_load(example.body)["groups"][0]["rules"]
    assert [rule["alert"] for rule in rules] == ["BirdbathSchedulerNotCycling", "BirdbathStateDiskFilling",
                                                 "BirdbathJobsHeldByGatewayFailures"]
    served = served_metric_names(gateway)
    for rule in rules:
        read = set(re.findall(r"\b(birdbath_\w+)", rule["expr"]))
        assert read and read <= served, f"{rule['alert']} reads metrics the gateway does not serve: {read - served}"


@runs("java")
def java(example: Example, gateway: GatewayProcess, tmp_path: Path) -> None:
    """From the repository, with the input files it ships (clients/java/examples)."""
    require_java()
    script = example.at(gateway.url).replace("/tmp/java", str(tmp_path / "java"))
    output = run_sh(script, ROOT)
    run_directory = tmp_path / "java" / "run"
    assert "HELLO FROM THE JAVA EXAMPLE" in "".join(p.read_text() for p in (run_directory / "out").iterdir())
    assert "exited with 0" in output
    assert [(run_directory / f"{node}.out").read_text() for node in "ABCD"] == [f"node {node}\n" for node in "ABCD"]


# -- the security section: keys made as written, a gateway started with the configuration, curl as the users -------
CAROL_PASSWORD = "carol secret 2"


def tls_setup(tmp_path: Path) -> Path:
    """Run the set-up commands (``/etc/birdbath`` moved under ``tmp_path``); the directory they filled."""
    directory = tmp_path / "etc-birdbath"
    script = examples()["tls-setup"].body.replace("/etc/birdbath", str(directory))
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"  # birdbath-passwd
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, input=CAROL_PASSWORD + "\n",
                            capture_output=True, text=True, timeout=300, env=dict(os.environ, PATH=path))
    assert result.returncode == 0, result.stdout + result.stderr
    return directory


def serve_tls(tmp_path: Path) -> tuple[GatewayProcess, Path]:
    """A gateway with the README's TLS configuration, on a free SSL port (the flag wins over 1985)."""
    directory = tls_setup(tmp_path)
    text = examples()["config-tls"].body.replace("/etc/birdbath", str(directory)) \
        .replace("/var/lib/birdbath-gateway", str(tmp_path / "state"))
    return GatewayProcess(tmp_path / "state", text, tmp=tmp_path, ssl=True, plain=False).start(), directory


@runs("tls-setup")
def tls_setup_commands(example: Example, tmp_path: Path) -> None:
    from gateway.identity.mapfile import SSL, CertificateMap
    from gateway.identity.passwords import PasswordFile

    directory = tls_setup(tmp_path)
    verified = run(["openssl", "verify", "-CAfile", "ca.pem", "server.crt", "alice.crt"], directory).stdout
    assert verified.splitlines() == ["server.crt: OK", "alice.crt: OK"]
    assert stat.S_IMODE((directory / "server.pem").stat().st_mode) == 0o600
    assert PasswordFile.load(directory / "passwords").check("carol", CAROL_PASSWORD)
    # safe to copy: no certificate makes its holder root or a queue super user
    mapping = CertificateMap.load(directory / "certificate_mapfile")
    assert mapping.canonicalize(SSL, "/O=Example/OU=People/CN=alice") == "alice"
    for name in ("root", "condor"):
        for unit in ("People", "Robots"):
            assert mapping.canonicalize(SSL, f"/O=Example/OU={unit}/CN={name}") is None
    assert mapping.canonicalize(SSL, "/O=Elsewhere/OU=Robots/CN=build-robot") is None


@runs("config-tls")
def config_tls(example: Example, tmp_path: Path) -> None:
    """Starts; plain HTTP is off; the SSL port wants credentials and serves alice's certificate."""
    process, directory = serve_tls(tmp_path)
    try:
        assert process.port is None
        context = ssl.create_default_context(cafile=str(directory / "ca.pem"))
        context.check_hostname = False  # the certificate names birdbath.example.org; we reach it at 127.0.0.1
        with pytest.raises(urllib.error.HTTPError, match="401"):
            urllib.request.urlopen(process.https_url + "condorSchedd.wsdl", timeout=30, context=context)
        context.load_cert_chain(directory / "alice.crt", directory / "alice.key")
        wsdl = urllib.request.urlopen(process.https_url + "condorSchedd.wsdl", timeout=30, context=context).read()
        assert f'location="{process.https_url}"'.encode() in wsdl
    finally:
        process.stop()


@runs("curl-tls")
def curl_tls(example: Example, tmp_path: Path) -> None:
    """Both curl commands as the README's note says to try them on one machine: at localhost, which the
    certificate names too (no --resolve), with carol's password given."""
    process, directory = serve_tls(tmp_path)
    try:
        script = example.body.replace("curl ", "curl -sS --fail -w '\\n' ") \
            .replace("birdbath.example.org:1985/", f"localhost:{process.ssl_port}/") \
            .replace("--user carol", f"--user 'carol:{CAROL_PASSWORD}'")
        answers = run_sh(script, directory).splitlines()
        assert [json.loads(answer)["status"]["code"] for answer in answers] == ["OK", "OK"]
        deadline = time.monotonic() + 30  # the log's own thread writes the request lines, shortly after the answers
        while not ("(alice by certificate)" in process.log() and "(carol by password)" in process.log()):
            assert time.monotonic() < deadline, process.log()
            time.sleep(0.05)
    finally:
        process.stop()


def tokens_config(directory: Path, tmp_path: Path) -> str:
    """The TLS configuration with the token lines added to its [birdbath] section (paths moved under tmp_path)."""
    text = examples()["config-tls"].body.replace("[birdbath]\n", "[birdbath]\n" + examples()["config-tokens"].body
                                                 + "\n")
    return text.replace("/etc/birdbath", str(directory)).replace("/var/lib/birdbath-gateway", str(tmp_path / "state"))


@runs("config-tokens")
def config_tokens(example: Example, tmp_path: Path) -> None:
    """The lines belong to [birdbath] and switch IDTOKENs on (SciTokens stay off with no issuer)."""
    path = tmp_path / "gateway.toml"
    path.write_text(tokens_config(tmp_path, tmp_path))
    settings = load(path).token_settings()
    assert settings.enabled() and settings.domain() == "birdbath.example.org" and not settings.scitokens_issuers
    assert settings.pool_signing_key_file == tmp_path / "tokens" / "POOL"


@runs("tokens-key")
def tokens_key(example: Example, tmp_path: Path) -> None:
    """64 random bytes, the gateway user's alone (as the gateway requires of a key file)."""
    run_sh(example.body.replace("/etc/birdbath", str(tmp_path)), tmp_path)
    key = tmp_path / "tokens" / "POOL"
    assert len(key.read_bytes()) == 64 and stat.S_IMODE(key.stat().st_mode) == 0o600


def test_the_tokens_key_is_made_before_the_configuration_names_it():
    """A gateway configured with a key file that is not there yet refuses to start: the README makes it first."""
    text = README.read_text()
    assert text.index("<!-- example: tokens-key -->") < text.index("<!-- example: config-tokens -->")


def test_the_readme_names_the_debian_packages_the_java_build_needs():
    packages = re.search(r'^PACKAGES="([^"]+)"', (ROOT / "clients" / "java" / "build.sh").read_text(), re.MULTILINE)
    java = README.read_text().split("**Java.**", 1)[1].split("<!-- example: java -->", 1)[0]
    assert packages and f"`{packages.group(1)}`" in " ".join(java.split()), java
    assert set(packages.group(1).split()) <= set(re.search(r'SYSTEM_PACKAGES="([^"]+)"',
                                                            (ROOT / "dev").read_text()).group(1).split())


@runs("tokens")
def tokens(example: Example, tmp_path: Path) -> None:
    """The key made as the README makes it, a gateway started with the README's TLS and token configuration, then
    the token made and used by curl as the TLS example's note says to try on one machine (at localhost)."""
    directory = tls_setup(tmp_path)
    config = directory / "gateway.toml"
    config.write_text(tokens_config(directory, tmp_path))
    run_sh(examples()["tokens-key"].body.replace("/etc/birdbath", str(directory)), directory)
    rest = example.body.replace("/etc/birdbath", str(directory))
    process = GatewayProcess(tmp_path / "state", config.read_text(), tmp=tmp_path, ssl=True, plain=False).start()
    try:
        script = rest.replace("curl ", "curl -sS --fail -w '\\n' ") \
            .replace("birdbath.example.org:1985/", f"localhost:{process.ssl_port}/")
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"  # birdbath
        answer = run_sh(script, directory, PATH=path).splitlines()[-1]
        assert json.loads(answer)["status"]["code"] == "OK"
        wait_for_line(process.log, "(alice@birdbath.example.org by idtoken)")  # (the log is written by a thread)
    finally:
        process.stop()


# -- running under condor_master and condor_shared_port ---------------------------------------------------------
def condor_config_lines(body: str) -> dict[str, str]:
    return {key.strip(): value.strip() for key, _, value in (line.partition("=") for line in body.splitlines())}


@runs("condor-master")
def condor_master(example: Example, tmp_path: Path) -> None:
    """The configuration as condor_master would use it: BIRDBATH in DAEMON_LIST, the program, and BIRDBATH_ARGS
    (paths moved under tmp_path, the TOML file the [daemon] example) started with CONDOR_INHERIT naming a master
    stand-in and CONDOR_CONFIG the example itself, so that BIRDBATH_NOT_RESPONDING_TIMEOUT is read by the bindings
    as the gateway reads it."""
    import shlex

    from gateway.testing_daemons import MasterStandIn, short_directory

    knobs = condor_config_lines(example.body)
    assert "BIRDBATH" in knobs["DAEMON_LIST"].split() and knobs["BIRDBATH"].endswith("/birdbath-gateway")
    (tmp_path / "condor_config").write_text(example.body + "\n")
    socket_dir = short_directory()
    daemon = examples()["config-daemon"].body.replace("/var/lock/condor/daemon_sock", str(socket_dir))
    (tmp_path / "gateway.toml").write_text(daemon.replace("[gateway]\n", f'[gateway]\nstate_dir = "{tmp_path}/state"\n'))
    args = shlex.split(knobs["BIRDBATH_ARGS"].replace("/etc/birdbath", str(tmp_path))
                       .replace("/var/log/condor", str(tmp_path)))
    with MasterStandIn() as master:
        env = dict(os.environ, PYTHONPATH=str(ROOT), CONDOR_CONFIG=str(tmp_path / "condor_config"),
                   CONDOR_INHERIT=f"{os.getpid()} {master.sinful} 0 0")
        process = subprocess.Popen([sys.executable, "-m", "gateway.cli", *args], cwd=ROOT, env=env,
                                   stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 60
            while not master.messages:
                assert process.poll() is None, process.stderr.read()
                assert time.monotonic() < deadline, (tmp_path / "BirdbathLog").read_text()
                time.sleep(0.1)
            assert (master.messages[0].pid, master.messages[0].timeout) == (process.pid, 600)
            assert (socket_dir / "birdbath").is_socket()
        finally:
            process.send_signal(signal.SIGQUIT)
            assert process.wait(timeout=60) == 0
            shutil.rmtree(socket_dir, ignore_errors=True)
    assert "fast shutdown" in (tmp_path / "BirdbathLog").read_text()


@runs("config-daemon")
def config_daemon(example: Example, tmp_path: Path) -> None:
    """Accepted as written (the directory aside, which this machine does not have)."""
    from gateway.config import validate

    path = tmp_path / "gateway.toml"
    path.write_text(example.body.replace("/var/lock/condor/daemon_sock", str(tmp_path / "sock")))
    settings = load(path)
    settings.state_dir = tmp_path / "state"
    validate(settings)
    assert settings.use_shared_port and settings.plain_port is None and settings.shared_port_id == "birdbath"


# -- low-latency jobs over AMQP: a private broker, a gateway configured by the README's [carod] block -------------
README_BROKER = "127.0.0.1:5672"


@pytest.fixture(scope="module")
def carod_gateway(amqp_broker):
    """The README's [carod] block, on the test broker's port, serving from a world-traversable directory (the jobs
    run as nobody)."""
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="readme-carod-", dir="/tmp"))
    base.chmod(0o755)
    text = examples()["config-carod"].body.replace("carod_broker_port = 5672", f"carod_broker_port = {amqp_broker.port}")
    assert f"carod_broker_port = {amqp_broker.port}" in text
    process = GatewayProcess(base / "state", text + "\n[backends.local]\nslots = 2\n", tmp=base).start()
    deadline = time.monotonic() + 30
    while "connected to the AMQP broker" not in process.log():
        assert time.monotonic() < deadline, process.log()
        time.sleep(0.1)
    yield process
    process.stop()
    shutil.rmtree(base, ignore_errors=True)


@runs("config-carod")
def config_carod(example: Example, carod_gateway: GatewayProcess) -> None:
    assert load_text(example.body).sections["carod"].enable_carod and "work queue grid" in carod_gateway.log()


def load_text(text: str):
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".toml") as stream:
        stream.write(text)
        stream.flush()
        return load(Path(stream.name))


@runs("amqp-seed")
def amqp_seed(example: Example, amqp_broker, carod_gateway: GatewayProcess, tmp_path: Path) -> None:
    import zipfile

    code = example.body.replace(README_BROKER, f"127.0.0.1:{amqp_broker.port}")
    lines = run_python(code, tmp_path).splitlines()
    assert lines == ["JobState:  JobStatus: 2 ExitCode: 0 Is Body Empty? Yes",
                     'JobState: "Exited" JobStatus: 4 ExitCode: 0 Is Body Empty? No']
    archive = zipfile.ZipFile(tmp_path / "job.results")
    assert sorted(archive.namelist()) == ["job.err", "job.out"] and archive.read("job.out") == b"Hello Grid!\n"


@runs("amqp-cli")
def amqp_cli(example: Example, amqp_broker, carod_gateway: GatewayProcess, tmp_path: Path) -> None:
    script = example.body.replace(README_BROKER, f"127.0.0.1:{amqp_broker.port}")
    lines = run_sh(script, tmp_path).splitlines()
    assert re.fullmatch(r"job 0 \([-0-9a-f]+\): JobStatus 2", lines[0]), lines
    assert re.fullmatch(r'job 0 \([-0-9a-f]+\): JobStatus 4 JobState "Exited" ExitCode 0 results: job.err job.out',
                        lines[1]), lines
    assert lines[2:] == ["Hello Grid!"]


# -- QMF: a private qpidd, a gateway configured by the README's [qmf] block, consoles on Python 2.7 and 3 -------
README_QMF_URL = "amqp://localhost:5672"


@pytest.fixture(scope="module")
def qmf_broker(tmp_path_factory):
    from gateway.testing_qpidd import QpidBroker, missing_broker, qpidd

    if qpidd() is None:
        pytest.skip(missing_broker())
    broker = QpidBroker(tmp_path_factory.mktemp("readme-qpidd")).start()
    yield broker
    broker.stop()


@pytest.fixture(scope="module")
def qmf_gateway(qmf_broker, tmp_path_factory):
    from tests.test_qmf import wait_ready

    text = examples()["config-qmf"].body.replace("qmf_broker_port = 5672", f"qmf_broker_port = {qmf_broker.port}")
    assert f"qmf_broker_port = {qmf_broker.port}" in text
    tmp = tmp_path_factory.mktemp("readme-qmf")
    process = GatewayProcess(tmp / "state", text + "\n[backends.local]\nslots = 0\n", tmp=tmp).start()
    wait_ready(process)
    yield process
    process.stop()


def run_python2(code: str, broker, cwd: Path) -> list[str]:
    from tests.test_qmf import console, python2_console

    script = cwd / "console.py"
    script.write_text(code.replace(README_QMF_URL, broker.url()))
    done = console(python2_console(), script)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.splitlines()


@runs("config-qmf")
def config_qmf(example: Example, qmf_gateway: GatewayProcess) -> None:
    assert load_text(example.body).sections["qmf"].enable_qmf and "QMF broker connected" in qmf_gateway.log()


@runs("qmf-seed")
def qmf_seed(example: Example, qmf_broker, qmf_gateway: GatewayProcess, tmp_path: Path) -> None:
    from tests.test_qmf import DATA

    assert example.body == (DATA / "seed_submit.py").read_text().rstrip("\n"), "the README's copy is the seed's"
    lines = run_python2(example.body, qmf_broker, tmp_path)
    assert re.fullmatch(r"Submitted job: .+#\d+\.0", lines[0]) and lines[1:3] == ["Job status: Idle", "Job properties:"]
    assert f"  CustomId = {lines[0].split(': ')[1]}" in lines and "  Cmd = /bin/sleep" in lines


@runs("qmf-grid")
def qmf_grid(example: Example, qmf_broker, qmf_gateway: GatewayProcess, tmp_path: Path) -> None:
    assert run_python2(example.body, qmf_broker, tmp_path) == ["0", "0", "1 0", "secret sauce", "0"]


@runs("qmf-python3")
def qmf_python3(example: Example, qmf_broker, qmf_gateway: GatewayProcess, tmp_path: Path) -> None:
    lines = run_python(example.body.replace("amqp://127.0.0.1:5672", qmf_broker.url()), tmp_path).splitlines()
    assert re.fullmatch(r"0 .+#\d+\.0", lines[0]) and lines[1:] == ["65537"], lines

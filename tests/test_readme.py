"""Every example in README.md runs as written against a real gateway, so an example that stops working fails CI.

Each fenced block of the README is preceded by ``<!-- example: NAME -->`` and run by the runner of that name below
(tox environment ``readme``).  The only changes made to a block before it runs are the gateway's address (the README
says ``http://127.0.0.1:1984``, a test gateway listens on a free port) and scratch paths (``/tmp/java``, the state
directory), so that runs cannot collide.  A block without a runner, or a runner without a block, fails the suite.
"""

from __future__ import annotations

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

from backends.interface import ENTRY_POINT_GROUP
from gateway.config import load
from gateway.core.auth import LOOPBACK, HostList
from gateway.testing import GatewayProcess
from tests.conftest import ROOT, module_gateway, require_java
from tests.dags import write_dag

pytestmark = pytest.mark.readme

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
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0


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


@runs("curl")
def curl(example: Example, start_gateway: Callable[..., GatewayProcess], tmp_path: Path) -> None:
    """On a fresh gateway, as the README's comment says: the first job is 1.0."""
    fresh = start_gateway()
    submitted, job, submissions = run_sh(example.at(fresh.url), tmp_path).splitlines()
    assert re.fullmatch(r'\{"status": \{"code": "OK", "text": "OK"\}, "id": "[^"#]+#1\.0"\}', submitted)
    assert '"code": "OK"' in job and '"Cmd": {"TYPE": 3, "VALUE": "/bin/sleep"}' in job
    assert '"code": "OK"' in submissions


@runs("cli")
def cli(example: Example, start_gateway: Callable[..., GatewayProcess], tmp_path: Path) -> None:
    """The session as the README's comments tell it, on a fresh gateway (so the clusters are 1 and 2)."""
    fresh = start_gateway()
    lines = run_sh(example.at(fresh.url), tmp_path).splitlines()
    user = run(["id", "-un"], tmp_path).stdout.strip()
    assert lines[:3] == ["1 job(s) submitted to cluster 1.", "job 1.0: Completed, exit code 3", "exit status 3"]
    assert lines[3] == "1 0 4 3"
    assert sorted(lines[4:6]) == ["out/hello.out", "out/sh"]
    assert lines[6:] == ["hello", "1 3", "2 job(s) submitted to cluster 2.", "All jobs in cluster 2 have been held.",
                         "2 0 not now", "2 1 not now", f'All jobs of user "{user}" have been marked for removal.']


def write_config(example: Example, tmp_path: Path) -> Path:
    path = tmp_path / "gateway.toml"
    path.write_text(example.body.replace("/var/lib/birdbath-gateway", str(tmp_path / "state")))
    return path


def start_configured(path: Path, tmp_path: Path) -> GatewayProcess:
    process = GatewayProcess(tmp_path / "state", tmp=tmp_path, extra_args=("--config", str(path)))
    return process.start()


@runs("config")
def config(example: Example, tmp_path: Path) -> None:
    """Consistent (listening beyond loopback, it lets more than loopback in) and accepted by a real gateway."""
    path = write_config(example, tmp_path)
    settings = load(path)
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


@runs("java")
def java(example: Example, gateway: GatewayProcess, tmp_path: Path) -> None:
    require_java()
    for name in ("clients", "wsdl"):  # the commands run from the repository
        (tmp_path / name).symlink_to(ROOT / name)
    (tmp_path / "prog.sh").write_text("#!/bin/sh\ntr a-z A-Z < \"$1\"\n")
    (tmp_path / "input.txt").write_text("hello\n")
    write_dag(tmp_path, "JOB A A.sub\nJOB B B.sub\nJOB C C.sub\nJOB D D.sub\nPARENT A CHILD B C\nPARENT B C CHILD D\n",
              {node: "true" for node in "ABCD"}, name="diamond.dag")
    script = example.at(gateway.url).replace("/tmp/java", str(tmp_path / "java"))
    output = run_sh(script, tmp_path)
    assert (tmp_path / "out").is_dir() and "HELLO" in "".join(p.read_text() for p in (tmp_path / "out").iterdir())
    assert "exited with 0" in output


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
    from gateway.identity.passwords import PasswordFile

    directory = tls_setup(tmp_path)
    verified = run(["openssl", "verify", "-CAfile", "ca.pem", "server.crt", "alice.crt"], directory).stdout
    assert verified.splitlines() == ["server.crt: OK", "alice.crt: OK"]
    assert stat.S_IMODE((directory / "server.pem").stat().st_mode) == 0o600
    assert PasswordFile.load(directory / "passwords").check("carol", CAROL_PASSWORD)


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
    """Both curl commands, with the name the certificate gives resolved to loopback and carol's password given."""
    process, directory = serve_tls(tmp_path)
    try:
        resolve = f"--resolve birdbath.example.org:{process.ssl_port}:127.0.0.1"
        script = example.body.replace("curl ", f"curl -sS --fail -w '\\n' {resolve} ") \
            .replace(":1985/", f":{process.ssl_port}/").replace("--user carol", f"--user 'carol:{CAROL_PASSWORD}'")
        answers = run_sh(script, directory).splitlines()
        assert [json.loads(answer)["status"]["code"] for answer in answers] == ["OK", "OK"]
        assert "(alice by certificate)" in process.log() and "(carol by password)" in process.log()
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

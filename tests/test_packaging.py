"""What ``pip install .`` ships: every package of the source tree, the WSDL, the console script and entry points.

The wheel is built from a copy of the checkout (so no build/ or egg-info appears in it) with the environment's own
setuptools, offline, and then inspected and imported from where it was unpacked, away from the checkout."""

from __future__ import annotations

import configparser
import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT

TOP_LEVEL = ("jobmodel", "gateway", "backends")
SKIP = shutil.ignore_patterns(".git", ".tox", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache",
                              "state")


def source_packages() -> set[str]:
    return {".".join(path.parent.relative_to(ROOT).parts)
            for top in TOP_LEVEL for path in (ROOT / top).rglob("__init__.py")}


def test_every_package_directory_is_listed_in_pyproject():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = source_packages()
    assert found <= listed, f"packages missing from pyproject.toml: {sorted(found - listed)}"


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> tuple[zipfile.ZipFile, str]:
    """The wheel, and what its build wrote on stderr."""
    # built offline with this environment's setuptools (pyproject's build requirement), as pip install . would
    pytest.importorskip("setuptools", minversion="77", reason="the build backend, setuptools>=77, is not installed")
    path, stderr = built_wheel(ROOT, tmp_path_factory.mktemp("packaging"))
    with zipfile.ZipFile(path) as archive:
        yield archive, stderr


def built_wheel(tree: Path, tmp: Path) -> tuple[Path, str]:
    """The wheel of a copy of ``tree`` built offline, and what the build wrote on stderr."""
    source = tmp / "source"
    shutil.copytree(tree, source, ignore=SKIP)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                            "--quiet", "--wheel-dir", str(tmp / "dist"), str(source)],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    (path,) = (tmp / "dist").glob("*.whl")
    return path, built.stderr


@pytest.fixture(scope="module")
def wheel(build: tuple[zipfile.ZipFile, str]) -> zipfile.ZipFile:
    return build[0]


def test_the_build_warns_of_nothing_and_the_license_is_an_spdx_expression(build):
    """(A license given as a TOML table made setuptools print a page of deprecation warnings at every install.)"""
    archive, stderr = build
    assert "Warning" not in stderr and "deprecated" not in stderr, stderr
    metadata = dist_info(archive, "METADATA").splitlines()
    assert "License-Expression: Apache-2.0" in metadata
    assert not any(line.startswith("License:") for line in metadata)


def test_the_client_builds_without_a_warning_too(tmp_path):
    """``./dev serve`` installs the client library beside the gateway: its build printed the same deprecation page."""
    pytest.importorskip("setuptools", minversion="77", reason="the build backend, setuptools>=77, is not installed")
    path, stderr = built_wheel(ROOT / "clients" / "python", tmp_path)
    assert "Warning" not in stderr and "deprecated" not in stderr, stderr
    with zipfile.ZipFile(path) as archive:
        assert "License-Expression: Apache-2.0" in dist_info(archive, "METADATA").splitlines()


def dist_info(wheel: zipfile.ZipFile, name: str) -> str:
    (member,) = [n for n in wheel.namelist() if n.endswith(f".dist-info/{name}") and n.count("/") == 1]
    return wheel.read(member).decode()


def test_the_wheel_ships_every_module_of_every_package_and_nothing_else(wheel):
    names = set(wheel.namelist())
    modules = {str(path.relative_to(ROOT)) for top in TOP_LEVEL for path in (ROOT / top).rglob("*.py")
               if "__pycache__" not in path.parts}
    shipped = {name for name in names if name.endswith(".py")}
    assert modules - shipped == set(), "modules the wheel leaves out"
    assert shipped - modules == set(), "modules in the wheel that the checkout does not have"
    packages = {str(Path(name).parent).replace("/", ".") for name in shipped}
    assert packages == source_packages()
    assert {"jobmodel", "backends.local.dag", "backends.htcondor", "gateway.soap"} <= packages
    tops = {name.split("/", 1)[0] for name in names if ".dist-info/" not in name}
    assert tops == set(TOP_LEVEL)  # no tests/, clients/ or bench/
    assert dist_info(wheel, "top_level.txt").split() == sorted(TOP_LEVEL)


def test_the_wheel_ships_every_wsdl_file_unchanged(wheel):
    shipped = sorted(name for name in wheel.namelist() if name.endswith((".wsdl", ".xsd")))
    assert shipped == ["gateway/wsdl/aviary-common.xsd", "gateway/wsdl/aviary-job.wsdl", "gateway/wsdl/aviary-job.xsd",
                       "gateway/wsdl/aviary-query.wsdl", "gateway/wsdl/aviary-query.xsd",
                       "gateway/wsdl/condorCollector.wsdl", "gateway/wsdl/condorSchedd.wsdl",
                       "gateway/wsdl/submission.wsdl"]
    for name in shipped:
        assert wheel.read(name) == (ROOT / "wsdl" / Path(name).name).read_bytes()


def test_the_console_script_backends_and_dependencies_are_declared(wheel):
    entry_points = configparser.ConfigParser()
    entry_points.read_string(dist_info(wheel, "entry_points.txt"))
    assert dict(entry_points["console_scripts"]) == {"birdbath-gateway": "gateway.cli:main",
                                                     "birdbath-passwd": "gateway.passwd:main"}
    assert dict(entry_points["birdbath.backends"]) == {"local": "backends.local:LocalBackend",
                                                       "htcondor": "backends.htcondor:HTCondorBackend"}
    metadata = dist_info(wheel, "METADATA")
    required = {line.split(":", 1)[1].strip().split(";")[0].strip()
                for line in metadata.splitlines() if line.startswith("Requires-Dist:")}
    for dependency in ("spyne==2.14.*", "lxml>=5", "twisted[tls]>=24.3", "bcrypt>=4", "htcondor==24.0.*"):
        assert dependency in required, (dependency, required)


UNPACKED_CHECK = """
import importlib.metadata, json, sys
from pathlib import Path
site = Path(sys.argv[1])
(info,) = site.glob("birdbath_gateway-*.dist-info")
dist = importlib.metadata.Distribution.at(info)
loaded = {}
for ep in dist.entry_points:
    target = ep.load()
    loaded[ep.group + ":" + ep.name] = sys.modules[target.__module__].__file__
from gateway.soap.wsdl import wsdl_path
print(json.dumps({"loaded": loaded, "wsdl": [str(wsdl_path(n)) for n in ("condorSchedd.wsdl", "submission.wsdl")]}))
"""


def test_the_unpacked_wheel_imports_its_entry_points_and_finds_its_wsdl_away_from_the_checkout(wheel, tmp_path):
    site = tmp_path / "site"
    wheel.extractall(site)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(site)}
    result = subprocess.run([sys.executable, "-c", UNPACKED_CHECK, str(site)], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert set(found["loaded"]) == {"console_scripts:birdbath-gateway", "console_scripts:birdbath-passwd",
                                    "birdbath.backends:local",
                                    "birdbath.backends:htcondor", "birdbath.commands:token",
                                    *(f"birdbath.frontends:{name}" for name in ("aviary", "birdbath", "carod",
                                                                                 "monitoring", "qmf", "rest",
                                                                                 "submission"))}
    for where in [*found["loaded"].values(), *found["wsdl"]]:
        assert Path(where).is_relative_to(site), where  # from the wheel, not the checkout
    assert [Path(p).read_bytes() for p in found["wsdl"]] == [(ROOT / "wsdl" / n).read_bytes()
                                                             for n in ("condorSchedd.wsdl", "submission.wsdl")]

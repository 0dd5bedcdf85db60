"""What ``pip install .`` ships: every package of the source tree, the WSDL, the console script and entry points."""

from __future__ import annotations

import tomllib

from tests.conftest import ROOT


def test_every_package_directory_is_listed_in_pyproject():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(path.parent.relative_to(ROOT).parts)
             for top in ("jobmodel", "gateway", "backends") for path in (ROOT / top).rglob("__init__.py")}
    assert found <= listed, f"packages missing from pyproject.toml: {sorted(found - listed)}"


def test_the_local_backend_and_the_console_script_are_declared():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["birdbath-gateway"] == "gateway.cli:main"
    assert project["entry-points"]["birdbath.backends"]["local"] == "backends.local:LocalBackend"

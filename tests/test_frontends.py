"""Front ends mount themselves (gateway/frontend.py): the worked example of docs/architecture.md, "Adding a front
end", is installed here as it says (its package, its one entry point line) in a directory of its own and reached on
a real gateway, with and without worker processes; an entry point that names no front end stops the start, saying
so; and every room's front end is installed by the project's own line."""

from __future__ import annotations

import re
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from gateway.frontend import ENTRY_POINT_GROUP, FrontEnd, installed
from gateway.testing import SOURCE_ROOT, GatewayProcess
from tests.test_logging import wait_for_line
from tests.test_workers import wait_for_workers

#: its tests start gateway processes of their own (the mark: gateway.testing.GATEWAY_MARK)
pytestmark = pytest.mark.gateway

DOCUMENT = SOURCE_ROOT / "docs" / "architecture.md"


def example() -> tuple[str, str]:
    """The section's package source and its entry point line, as the document shows them."""
    text = DOCUMENT.read_text()
    section = text[text.index("## Adding a front end"):]
    section = section[:section.find("\n## ", 1) if "\n## " in section[1:] else len(section)]
    python = re.search(r"```python\n(.*?)```", section, re.S)
    toml = re.search(r"```toml\n(.*?)```", section, re.S)
    assert python and toml, "the section shows a package and its line"
    return python.group(1), toml.group(1)


def install(directory: Path, package: str, source: str, entry_points: str) -> Path:
    """A distribution as pip leaves one: the package and its metadata's entry points (``entry_points.txt``, the
    line ``pyproject.toml`` declares), on a path the gateway imports from."""
    (directory / package).mkdir(parents=True)
    (directory / package / "__init__.py").write_text(source)
    metadata = directory / f"{package}-1.0.dist-info"
    metadata.mkdir()
    (metadata / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 1.0\n")
    groups = tomllib.loads(entry_points)["project"]["entry-points"]
    (metadata / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in names.items())
        for group, names in groups.items()))
    return directory


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


@pytest.mark.parametrize("workers", [0, 2], ids=["one process", "workers"])
def test_the_documented_front_end_is_one_package_and_one_line(tmp_path, workers):
    source, line = example()
    assert re.fullmatch(r'\[project\.entry-points\."birdbath\.frontends"\]\nhello = "hello_front:FRONT_END"\n',
                        line), "one line names it"
    site = install(tmp_path / "site", "hello_front", source, line)
    lone = ("--lone-connection-in-core", "no") if workers else ()  # (with workers, every request to a worker)
    gateway = GatewayProcess(tmp_path / "state", tmp=tmp_path, python_path=(site,),
                             extra_args=("--workers", str(workers), *lone)).start()
    try:
        if workers:  # (each connection then goes to a worker: they mount it too)
            wait_for_workers(gateway, workers)
        for _ in range(4):
            status, body = get(gateway.url + "hello")
            assert (status, body.decode().split()[0]) == (200, "hello") and len(body.split()) == 2, body
        assert get(gateway.url + "hello/below")[0] == 200  # a leaf takes the paths below it
        status, body = get(gateway.url + "condorSchedd.wsdl")  # the others are still there
        assert status == 200 and b"condorSchedd" in body
        wait_for_line(gateway.log, "GET /hello from 127.0.0.1: 200", *(["[worker "] if workers else []))
    finally:
        gateway.stop()


def test_without_the_line_the_package_serves_nothing(tmp_path):
    """The line is what mounts it: the package alone on the path is never imported."""
    source, _ = example()
    site = tmp_path / "site"
    (site / "hello_front").mkdir(parents=True)
    (site / "hello_front" / "__init__.py").write_text(source)
    gateway = GatewayProcess(tmp_path / "state", tmp=tmp_path, python_path=(site,)).start()
    try:
        status, _ = get(gateway.url + "hello")  # condorSchedd's, as any path no front end holds
        assert status == 404
    finally:
        gateway.stop()


def test_an_entry_point_that_names_no_front_end_stops_the_start_saying_so(tmp_path):
    site = install(tmp_path / "site", "not_front", "FRONT_END = object()\n",
                   '[project.entry-points."birdbath.frontends"]\nnot = "not_front:FRONT_END"\n')
    with pytest.raises(RuntimeError, match=r"exited with 2:[\s\S]*entry point 'not' \(not_front:FRONT_END\) is no "
                                           r"FrontEnd"):
        GatewayProcess(tmp_path / "state", tmp=tmp_path, python_path=(site,)).start()


def test_every_rooms_front_end_is_installed_by_the_projects_own_line():
    declared = tomllib.loads((SOURCE_ROOT / "pyproject.toml").read_text())["project"]["entry-points"][ENTRY_POINT_GROUP]
    rooms = sorted(path.parent.name for path in (SOURCE_ROOT / "gateway").glob("*/frontend.py"))
    assert sorted(value.split(".")[1] for value in declared.values()) == rooms
    assert sorted(front_end.name for front_end in installed()) == sorted(declared)  # (the install is current)
    assert all(isinstance(front_end, FrontEnd) for front_end in installed())

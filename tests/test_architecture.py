"""The tree keeps the architecture of the design: imports run one way and no module imports itself round a circle.

    gateway  ->  backends.interface  ->  jobmodel
    backends ->  jobmodel            (never gateway)
    jobmodel ->  nothing of ours

Read from the source with ``ast`` (every import, also those under ``if TYPE_CHECKING:`` and inside functions),
so a circle hidden behind a lazy import fails too.
"""

from __future__ import annotations

import ast
import builtins
import re
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGES = ("jobmodel", "gateway", "backends")
#: what each top-level package may import of ours (the modules named, or everything under them)
ALLOWED = {
    "jobmodel": ("jobmodel",),
    "backends": ("backends", "jobmodel"),
    #: (backends.evaluation and backends.literals: how a client's constraint is evaluated, of no backend, which the
    #: core and a worker's view of the jobs share with the backends)
    "gateway": ("gateway", "jobmodel", "backends.interface", "backends.registry", "backends.evaluation",
                "backends.literals"),
}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for top in PACKAGES for path in (ROOT / top).rglob("*.py")}


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules a module imports (``from package import module`` counts as the module)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def graph() -> dict[str, set[str]]:
    found = modules()
    known = set(found)
    return {name: imports_of(name, path, known) for name, path in found.items()}


def allowed(importer: str, imported: str) -> bool:
    rules = ALLOWED[importer.split(".")[0]]
    return any(imported == rule or imported.startswith(rule + ".") for rule in rules)


def test_imports_run_one_way():
    wrong = sorted(f"{importer} imports {imported}" for importer, targets in graph().items()
                   for imported in targets if not allowed(importer, imported))
    assert not wrong, "imports against the design's direction:\n" + "\n".join(wrong)


#: the rooms per standard: each speaks one protocol; the SOAP codec (``gateway.soap``) serves several and knows none
STANDARDS = ("gateway.birdbath", "gateway.aviary", "gateway.submission", "gateway.rest", "gateway.lowlatency",
             "gateway.qmf")


def test_the_soap_codec_knows_no_standard():
    wrong = sorted(f"{importer} imports {imported}" for importer, targets in graph().items()
                   if importer.startswith("gateway.soap") for imported in targets if imported.startswith(STANDARDS))
    assert not wrong, "the SOAP codec imports a standard built on it:\n" + "\n".join(wrong)


def test_no_standard_imports_another():
    """A front end talks to the core, never to another front end: each could be left out of an installation."""
    def room(module: str) -> str | None:
        return next((standard for standard in STANDARDS if module == standard or module.startswith(standard + ".")),
                    None)

    wrong = sorted(f"{importer} imports {imported}" for importer, targets in graph().items() if room(importer)
                   for imported in targets if room(imported) not in (None, room(importer)))
    assert not wrong, "a standard's room imports another's:\n" + "\n".join(wrong)


#: the transport and the app layer: HTTP, the tree, connections, the front-end object, the lifecycle, the assembly
TRANSPORT = ("gateway.http", "gateway.routes", "gateway.connections", "gateway.localsocket", "gateway.frontend",
             "gateway.lifecycle", "gateway.maybe", "gateway.app", "gateway.cli")


def test_the_transport_imports_no_protocols_room():
    """Front ends mount themselves (gateway/frontend.py); the transport knows none of them, nor the SOAP codec."""
    rooms = (*STANDARDS, "gateway.soap")
    wrong = sorted(f"{importer} imports {imported}" for importer, targets in graph().items()
                   if importer in TRANSPORT for imported in targets
                   if imported in rooms or imported.startswith(tuple(room + "." for room in rooms)))
    assert not wrong, "the transport imports a protocol's room:\n" + "\n".join(wrong)
    assert set(TRANSPORT) <= set(graph()), "a module named here is gone: name its successor"


#: the words of a SOAP message: its namespace, envelope, fault and WSDL (any case)
SOAP_WORDS = re.compile(r"schemas\.xmlsoap\.org|envelope|fault(?:code|string)|\bwsdl\b|\.wsdl", re.I)


def soap_texts(source: str) -> list[str]:
    """The string constants of a module's code (its docstrings aside, which may say what the transport does not do)
    that hold SOAP's words."""
    tree = ast.parse(source)
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [node.value if isinstance(node.value, str) else node.value.decode("latin-1") for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)) and id(node) not in docstrings
            and SOAP_WORDS.search(node.value if isinstance(node.value, str) else node.value.decode("latin-1"))]


def test_the_transport_holds_no_soap_text():
    """No fault or envelope of the transport's own, nor a 404 naming WSDLs: a refusal's body is the front end's
    (``Answering.refusal``), a 404 says the signposts the front ends put on the tree."""
    modules_ = modules()
    wrong = {name: soap_texts(modules_[name].read_text()) for name in TRANSPORT}
    assert not {name: texts for name, texts in wrong.items() if texts}


@pytest.mark.parametrize("source, found", [
    ('FAULT = b"<SOAP-ENV:Envelope><SOAP-ENV:Fault><faultstring>%s</faultstring>"', 1),
    ('NOT_FOUND = "WSDLs: GET /condorSchedd.wsdl"', 1),
    ('"""A refusal is the front end\'s (a SOAP fault); no envelope here."""\nTEXT = b"text/plain"', 0),
])
def test_the_soap_text_finder_finds_soap_text(source, found):
    assert len(soap_texts(source)) == found


def find_circle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import circle, as the list of modules round it, or None."""
    state: dict[str, int] = {}  # 1 on the current path, 2 finished
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(edges.get(node, ())):
            if state.get(target) == 1:
                return path[path.index(target):] + [target]
            if target not in state and (circle := visit(target)):
                return circle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (circle := visit(node)):
            return circle
    return None


def test_no_module_imports_itself_round_a_circle():
    circle = find_circle(graph())
    assert circle is None, "import circle: " + " -> ".join(circle)


@pytest.mark.parametrize("edges, circle", [
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, ["a", "b", "c", "a"]),
    ({"a": {"b"}, "b": set(), "c": {"b"}}, None),
])
def test_the_circle_finder_finds_circles(edges, circle):
    assert find_circle(edges) == circle


def test_the_import_reader_sees_relative_lazy_and_type_checking_imports(tmp_path):
    source = tmp_path / "mod.py"
    source.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import X\n"
                      "def f():\n    from ..c import d\n")
    known = {"p.q.mod", "p.q.b", "p.c", "p.c.d"}
    assert imports_of("p.q.mod", source, known) == {"p.q.b", "p.c.d"}


# -- the newcomer's map (docs/architecture.md) names only what the tree has -----------------------------------------

ARCHITECTURE = ROOT / "docs" / "architecture.md"
#: a path of the repository as prose names it (``gateway/http.py``, ``docs/architecture.md``, ``backends/local``)
TREE_PATH = re.compile(r"(?<![\w/.-])((?:docs|gateway|backends|jobmodel|clients|wsdl|tests)/[\w./-]*\w)")
#: a class name as prose names it (``ConnectionGuard``, ``BirdbathSchedd``): two or more capitalised words
CLASS_NAME = re.compile(r"\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)+\b")


def missing_paths(text: str) -> list[str]:
    return sorted({path for path in TREE_PATH.findall(text) if not (ROOT / path).exists()})


def defined_classes() -> set[str]:
    return {node.name for path in modules().values() for node in ast.walk(ast.parse(path.read_text(), str(path)))
            if isinstance(node, ast.ClassDef)}


def test_the_architecture_document_names_only_files_that_exist():
    text = ARCHITECTURE.read_text()
    assert len(TREE_PATH.findall(text)) > 30  # the map names the tree's files, or this test checks nothing
    assert not missing_paths(text), f"docs/architecture.md names files the tree lacks: {missing_paths(text)}"


def test_the_architecture_document_names_only_classes_that_exist():
    wsdl_types = {name for path in (ROOT / "wsdl").glob("*.wsdl")
                  for name in re.findall(r'<xsd:complexType name="(\w+)"', path.read_text())}
    known = defined_classes() | set(dir(builtins)) | wsdl_types
    unknown = sorted(set(CLASS_NAME.findall(ARCHITECTURE.read_text())) - known)
    assert not unknown, f"docs/architecture.md names classes the tree does not define: {unknown}"


def test_module_texts_point_only_at_docs_that_exist():
    dead = {f"{path.relative_to(ROOT)}: {name}" for top in (*PACKAGES, "clients", "tests")
            for path in (ROOT / top).rglob("*.py") if path != Path(__file__)  # (its own examples name missing ones)
            for name in missing_paths(path.read_text()) if name.startswith("docs/")}
    assert not dead, "modules point at docs the repository lacks:\n" + "\n".join(sorted(dead))


@pytest.mark.parametrize("text, missing", [
    ("see docs/birdbath.md §5 and `gateway/http.py`", ["docs/birdbath.md"]),
    ("(`gateway/nowhere.py`), backends/local/store.py.", ["gateway/nowhere.py"]),
    ("a path inside another: /work/docs/x.md or mydocs/y.md", []),
])
def test_the_path_finder_finds_missing_paths(text, missing):
    assert missing_paths(text) == missing

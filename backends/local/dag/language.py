"""The DAG file language, as HTCondor's DAGMan documents it (the subset the gateway runs).

JOB (with DIR, NOOP and DONE), PARENT ... CHILD ..., RETRY (with UNLESS-EXIT), VARS, SCRIPT PRE/POST, PRE_SKIP,
ABORT-DAG-ON, DONE, CATEGORY and MAXJOBS; comments and backslash line continuations.  Keywords are
case-insensitive.  Anything else is a :class:`DagSyntaxError` naming the file and line, never silently ignored.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable


class DagSyntaxError(ValueError):
    pass


@dataclass
class Script:
    executable: str
    arguments: list[str]


@dataclass
class Node:
    name: str
    submit_file: str
    directory: str | None = None
    noop: bool = False
    done: bool = False
    retries: int = 0
    retry_unless_exit: int | None = None
    variables: dict[str, str] = field(default_factory=dict)
    pre: Script | None = None
    post: Script | None = None
    pre_skip: int | None = None
    category: str | None = None
    parents: list[str] = field(default_factory=list)
    children: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class AbortRule:
    value: int
    dag_return: int | None


@dataclass
class Dag:
    path: Path
    nodes: dict[str, Node] = field(default_factory=dict)
    abort_on: dict[str, AbortRule] = field(default_factory=dict)
    max_jobs: dict[str, int] = field(default_factory=dict)

    def directory_of(self, node: Node) -> Path:
        """Where a node's submit file and scripts are taken from: its DIR, relative to the DAG file's directory."""
        if node.directory is None:
            return self.path.parent
        return Path(node.directory) if Path(node.directory).is_absolute() else self.path.parent / node.directory

    def node(self, name: str, where: str) -> Node:
        try:
            return self.nodes[name]
        except KeyError:
            raise DagSyntaxError(f"{where}: no node named {name!r} (JOB lines must come first)") from None


_VARS = re.compile(r'\s*([A-Za-z_+][\w.+]*)\s*=\s*"((?:[^"\\]|\\.)*)"')


def read(path: Path, read_text: Callable[[Path], str] = Path.read_text) -> Dag:
    """Parse a DAG file; raises DagSyntaxError with ``file:line`` for anything it does not understand.

    ``read_text`` reads it (the DAG runner's reads it with the rights of the DAG's owner)."""
    try:
        text = read_text(path)
    except OSError as exc:
        raise DagSyntaxError(f"cannot read DAG file {path}: {exc.strerror}") from None
    dag = Dag(path)
    for number, line in _logical_lines(text):
        where = f"{path.name}:{number}"
        words = line.split()
        keyword = words[0].upper()
        handler = _HANDLERS.get(keyword)
        if handler is None:
            raise DagSyntaxError(f"{where}: unsupported DAG command {words[0]!r}")
        handler(dag, line, words, where)
    return dag


def apply_done(dag: Dag, path: Path, read_text: Callable[[Path], str] = Path.read_text) -> int:
    """Mark the nodes a rescue DAG lists as DONE; returns how many (``read_text`` as for :func:`read`)."""
    try:
        text = read_text(path)
    except OSError as exc:
        raise DagSyntaxError(f"cannot read rescue DAG {path}: {exc.strerror}") from None
    marked = 0
    for number, line in _logical_lines(text):
        words = line.split()
        if words[0].upper() == "DONE" and len(words) == 2:
            dag.node(words[1], f"{path.name}:{number}").done = True
            marked += 1
    return marked


def _logical_lines(text: str) -> list[tuple[int, str]]:
    lines: list[tuple[int, str]] = []
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), start=1):
        if not pending:
            start = number
        stripped = raw.strip()
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        full = (pending + stripped).strip()
        pending = ""
        if full and not full.startswith("#"):
            lines.append((start, full))
    if pending.strip():
        lines.append((start, pending.strip()))
    return lines


def _integer(text: str, where: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise DagSyntaxError(f"{where}: {what} must be an integer, not {text!r}") from None


def _job(dag: Dag, line: str, words: list[str], where: str) -> None:
    if len(words) < 3:
        raise DagSyntaxError(f"{where}: JOB needs a node name and a submit file")
    name, submit = words[1], words[2]
    if name in dag.nodes:
        raise DagSyntaxError(f"{where}: node {name!r} is defined twice")
    node = Node(name, submit)
    rest = words[3:]
    while rest:
        option = rest.pop(0).upper()
        if option == "DIR" and rest:
            node.directory = rest.pop(0)
        elif option == "NOOP":
            node.noop = True
        elif option == "DONE":
            node.done = True
        else:
            raise DagSyntaxError(f"{where}: unexpected {option!r} in JOB line")
    dag.nodes[name] = node


def _parent(dag: Dag, line: str, words: list[str], where: str) -> None:
    upper = [word.upper() for word in words]
    if "CHILD" not in upper:
        raise DagSyntaxError(f"{where}: PARENT line without CHILD")
    split = upper.index("CHILD")
    parents, children = words[1:split], words[split + 1:]
    if not parents or not children:
        raise DagSyntaxError(f"{where}: PARENT ... CHILD ... needs nodes on both sides")
    for parent in parents:
        for child in children:
            parent_node, child_node = dag.node(parent, where), dag.node(child, where)
            if child not in parent_node.children:
                parent_node.children.append(child)
                child_node.parents.append(parent)


def _retry(dag: Dag, line: str, words: list[str], where: str) -> None:
    if len(words) not in (3, 5) or (len(words) == 5 and words[3].upper() != "UNLESS-EXIT"):
        raise DagSyntaxError(f"{where}: RETRY JobName N [UNLESS-EXIT value]")
    node = dag.node(words[1], where)
    node.retries = _integer(words[2], where, "the number of retries")
    if len(words) == 5:
        node.retry_unless_exit = _integer(words[4], where, "the UNLESS-EXIT value")


def _vars(dag: Dag, line: str, words: list[str], where: str) -> None:
    if len(words) < 3:
        raise DagSyntaxError(f'{where}: VARS JobName name="value" ...')
    node = dag.node(words[1], where)
    rest = line.split(None, 2)[2]
    if rest.split()[0].upper() in ("PREPEND", "APPEND"):
        rest = rest.split(None, 1)[1] if len(rest.split()) > 1 else ""
    position = 0
    while position < len(rest):
        match = _VARS.match(rest, position)
        if match is None:
            if rest[position:].strip():
                raise DagSyntaxError(f'{where}: cannot read VARS from {rest[position:].strip()!r} '
                                     f'(expected name="value")')
            break
        node.variables[match.group(1)] = re.sub(r"\\(.)", r"\1", match.group(2))
        position = match.end()


def _script(dag: Dag, line: str, words: list[str], where: str) -> None:
    rest = words[1:]
    if rest and rest[0].upper() in ("DEFER", "DEBUG"):
        raise DagSyntaxError(f"{where}: SCRIPT {rest[0].upper()} is not supported")
    if len(rest) < 3 or rest[0].upper() not in ("PRE", "POST"):
        raise DagSyntaxError(f"{where}: SCRIPT PRE|POST JobName executable [arguments]")
    kind, name = rest[0].upper(), rest[1]
    try:
        command = shlex.split(line.split(None, 3)[3]) if len(line.split(None, 3)) > 3 else []
    except ValueError as exc:
        raise DagSyntaxError(f"{where}: {exc}") from None
    targets = list(dag.nodes.values()) if name.upper() == "ALL_NODES" else [dag.node(name, where)]
    for node in targets:
        script = Script(command[0], command[1:])
        if kind == "PRE":
            node.pre = script
        else:
            node.post = script


def _pre_skip(dag: Dag, line: str, words: list[str], where: str) -> None:
    if len(words) != 3:
        raise DagSyntaxError(f"{where}: PRE_SKIP JobName exit-code")
    dag.node(words[1], where).pre_skip = _integer(words[2], where, "the PRE_SKIP exit code")


def _abort_dag_on(dag: Dag, line: str, words: list[str], where: str) -> None:
    if len(words) not in (3, 5) or (len(words) == 5 and words[3].upper() != "RETURN"):
        raise DagSyntaxError(f"{where}: ABORT-DAG-ON JobName value [RETURN dag-return-value]")
    dag.node(words[1], where)
    dag.abort_on[words[1]] = AbortRule(_integer(words[2], where, "the abort value"),
                                       _integer(words[4], where, "the RETURN value") if len(words) == 5 else None)


def _done(dag: Dag, line: str, words: list[str], where: str) -> None:
    if len(words) != 2:
        raise DagSyntaxError(f"{where}: DONE JobName")
    dag.node(words[1], where).done = True


def _category(dag: Dag, line: str, words: list[str], where: str) -> None:
    if len(words) != 3:
        raise DagSyntaxError(f"{where}: CATEGORY JobName CategoryName")
    dag.node(words[1], where).category = words[2]


def _max_jobs(dag: Dag, line: str, words: list[str], where: str) -> None:
    if len(words) != 3:
        raise DagSyntaxError(f"{where}: MAXJOBS CategoryName N")
    dag.max_jobs[words[1]] = _integer(words[2], where, "MAXJOBS")


_HANDLERS = {
    "JOB": _job, "PARENT": _parent, "RETRY": _retry, "VARS": _vars, "SCRIPT": _script, "PRE_SKIP": _pre_skip,
    "ABORT-DAG-ON": _abort_dag_on, "DONE": _done, "CATEGORY": _category, "MAXJOBS": _max_jobs,
}

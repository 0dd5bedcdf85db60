"""A DAGMan job as a schedd sees it: how to recognise one, its command line, its log and its rescue DAGs."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import classad2

from jobmodel.arguments import ArgumentSyntaxError, parse_environment_v1, parse_environment_v2, parse_v1, parse_v2
from jobmodel.classads import evaluate_string
from jobmodel.jobs import Universe

from ..jobspec import universe_of
from ..owners import Account, Accounts, NoAccount
from . import files
from .language import Dag

MAX_RESCUE = 100


class DagError(ValueError):
    """The DAG cannot run at all (bad arguments, unreadable or invalid DAG file): it fails with this message."""


def is_dagman(ad: classad2.ClassAd) -> bool:
    return universe_of(ad) == Universe.SCHEDULER and os.path.basename(evaluate_string(ad, "Cmd")) == "condor_dagman"


@dataclass(frozen=True)
class DagmanOptions:
    dag: Path
    auto_rescue: bool = True
    rescue_from: int = 0
    lock_file: Path | None = None
    max_jobs: int = 0
    max_pre: int = 0
    max_post: int = 0
    ignored: tuple[str, ...] = ()


#: condor_dagman flags that take a value and that the built-in runner accepts but does not need
_IGNORED_WITH_VALUE = {"-debug", "-l", "-p", "-csdversion", "-dagman", "-notification", "-maxidle", "-priority",
                       "-outfile_dir", "-config", "-batch-name", "-load_save", "-dorecovery"}
_IGNORED_FLAGS = {"-f", "-allowversionmismatch", "-suppress_notification", "-dont_suppress_notification",
                  "-update_submit", "-import_env", "-usedagdir", "-verbose", "-force", "-noeventchecks"}


def options(ad: classad2.ClassAd) -> DagmanOptions:
    """Read condor_dagman's command line from the job ad (condor_submit_dag's form or the SOAP recipe's)."""
    iwd = Path(evaluate_string(ad, "Iwd") or "/")
    try:
        words = parse_v2(evaluate_string(ad, "Arguments")) if "Arguments" in ad else parse_v1(evaluate_string(ad, "Args"))
    except ArgumentSyntaxError as exc:
        raise DagError(f"cannot parse condor_dagman's arguments: {exc}") from None
    values: dict[str, str] = {}
    ignored: list[str] = []
    dags: list[str] = []
    position = 0
    while position < len(words):
        flag = words[position].lower()
        takes_value = flag in ("-dag", "-autorescue", "-dorescuefrom", "-lockfile", "-maxjobs", "-maxpre",
                               "-maxpost") or flag in _IGNORED_WITH_VALUE
        if takes_value and position + 1 >= len(words):
            raise DagError(f"condor_dagman option {words[position]} needs a value")
        if flag == "-dag":
            dags.append(words[position + 1])
        elif takes_value and flag not in _IGNORED_WITH_VALUE:
            values[flag] = words[position + 1]
        elif takes_value or flag in _IGNORED_FLAGS:
            ignored.append(words[position])
        else:
            raise DagError(f"unknown condor_dagman option {words[position]!r}")
        position += 2 if takes_value else 1
    if len(dags) != 1:
        raise DagError(f"condor_dagman needs exactly one -Dag file here (got {len(dags)})")

    def number(flag: str) -> int:
        try:
            return int(values.get(flag, "0"))
        except ValueError:
            raise DagError(f"condor_dagman option {flag} needs a number, not {values[flag]!r}") from None

    lock = values.get("-lockfile")
    return DagmanOptions(dag=_under(iwd, dags[0]), auto_rescue=number("-autorescue") != 0 if "-autorescue" in values
                         else True, rescue_from=number("-dorescuefrom"),
                         lock_file=_under(iwd, lock) if lock else None, max_jobs=number("-maxjobs"),
                         max_pre=number("-maxpre"), max_post=number("-maxpost"), ignored=tuple(ignored))


def dagman_log_path(ad: classad2.ClassAd, dag: Path) -> Path:
    """``_CONDOR_DAGMAN_LOG`` from the job's environment (as condor_submit_dag sets it), else ``<dag>.dagman.out``."""
    try:
        if "Environment" in ad:
            environment = parse_environment_v2(evaluate_string(ad, "Environment"))
        else:
            environment = parse_environment_v1(evaluate_string(ad, "Env"))
    except ArgumentSyntaxError:
        environment = {}
    configured = environment.get("_CONDOR_DAGMAN_LOG")
    return _under(dag.parent, configured) if configured else dag.with_name(dag.name + ".dagman.out")


def _under(base: Path, name: str) -> Path:
    return Path(name) if os.path.isabs(name) else base / name


def rescue_files(dag: Path, account: Account | None = None) -> dict[int, Path]:
    """The rescue DAGs of ``dag`` by number, as its owner sees its directory (none if they cannot list it)."""
    prefix = f"{dag.name}.rescue"
    try:
        names = files.names_in(account, dag.parent)
    except OSError:
        return {}
    found = {}
    for name in names:
        number = name[len(prefix):]
        if name.startswith(prefix) and len(number) == 3 and number.isdigit() and 1 <= int(number) <= MAX_RESCUE:
            found[int(number)] = dag.with_name(name)
    return found


def rescue_to_use(options: DagmanOptions, account: Account | None = None) -> Path | None:
    """-DoRescueFrom N names one; otherwise -AutoRescue (on by default) takes the newest."""
    found = rescue_files(options.dag, account)
    if options.rescue_from:
        if options.rescue_from not in found:
            raise DagError(f"-DoRescueFrom {options.rescue_from}: {options.dag.name}.rescue"
                           f"{options.rescue_from:03d} does not exist")
        return found[options.rescue_from]
    if options.auto_rescue and found:
        return found[max(found)]
    return None


def write_rescue(dag: Dag, done: list[str], failed: list[str], account: Account | None = None) -> Path:
    """A partial rescue DAG (DONE lines only), numbered after the newest existing one, written as the DAG's owner
    (created, never written through an existing file or link)."""
    lines = [
        "# Rescue DAG file, created after running",
        f"#   the {dag.path.name} DAG file",
        f"# Created {time.strftime('%m/%d/%Y %H:%M:%S UTC', time.gmtime())}",
        "# Rescue DAG version: 2.0.1 (partial)",
        "#",
        f"# Total number of Nodes: {len(dag.nodes)}",
        f"# Nodes premarked DONE: {len(done)}",
        f"# Nodes that failed: {len(failed)}",
        f"#   {','.join(failed)},<ENDLIST>",
        "",
        *[f"DONE {name}" for name in done],
    ]
    number = max(rescue_files(dag.path, account), default=0) + 1
    while True:
        path = dag.path.with_name(f"{dag.path.name}.rescue{number:03d}")
        try:
            files.write_text(account, path, "\n".join(lines) + "\n", exclusive=True)
            return path
        except FileExistsError:  # one it could not see, or made meanwhile: take the next number
            if number >= MAX_RESCUE:
                raise
            number += 1


class DagmanLog:
    """``<dag>.dagman.out``: what the DAG runner did, one time-stamped line each.

    Opened once, as the DAG's owner (:meth:`open`, on the backend's thread); a log that cannot be opened or
    written is skipped, as before, rather than stopping the DAG."""

    def __init__(self, path: Path | None, stream: TextIO | None = None) -> None:
        self.path = path
        self._stream = stream

    @classmethod
    def open(cls, path: Path | None, account: Account | None = None) -> "DagmanLog":
        if path is None:
            return cls(None)
        try:
            return cls(path, files.append(account, path))
        except OSError:
            return cls(path)

    def __call__(self, message: str) -> None:
        if self._stream is None:
            return
        stamp = time.strftime("%m/%d/%y %H:%M:%S")
        try:
            self._stream.write(f"{stamp} {message}\n")
        except (OSError, ValueError):
            pass

    def close(self) -> None:
        if self._stream is not None:
            try:
                self._stream.close()
            except OSError:
                pass
            self._stream = None


def remove_lock_file(ad: classad2.ClassAd, accounts: Accounts | None = None) -> None:
    """Remove a DAGMan job's ``-Lockfile`` once its DAG has ended (a DAG that only stopped keeps it), as the job's
    owner (``accounts`` maps it to its account; an owner without one never ran, so made no lock file)."""
    try:
        lock_file = options(ad).lock_file
        if lock_file is not None:
            owner = ad.get("Owner")
            files.remove((accounts or Accounts()).of(owner if isinstance(owner, str) else None), lock_file)
    except (DagError, NoAccount, OSError, RuntimeError):
        pass

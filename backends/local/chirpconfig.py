"""Whether a run gets a chirp server, and what the job's environment says about it.

As condor_starter does (``JICShadow::initIOProxy``): ``WantIOProxy`` turns on the file commands and, unless
``WantRemoteUpdates`` says otherwise, the job-ad commands (``set_job_attr``, ``get_job_attr``, ``ulog``);
``WantDelayedUpdates`` (default true) the ``*_delayed`` ones.  One difference: a starter also serves delayed updates
to every job that asked for nothing; here a job without ``WantIOProxy`` or ``WantRemoteUpdates`` has no chirp
server at all.  Each node's server writes ``<scratch>/.chirp.config`` ("host port cookie", as the starter does) and
the job finds it through ``_CONDOR_CHIRP_CONFIG``; ``condor_chirp`` and ``condor_config_val`` are first on its
``PATH`` (the parallel starter puts HTCondor's ``BIN`` there).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import classad2

from jobmodel.classads import evaluate

from .owners import Account

CONFIG_NAME = ".chirp.config"


@dataclass(frozen=True)
class ChirpPlan:
    """The chirp servers a run gets: one per node (``scratch``: each node's scratch directory, where its
    ``.chirp.config`` goes and the file commands are confined), as ``account`` (None: the gateway's user)."""

    scratch: tuple[Path, ...]
    account: Account | None
    files: bool
    updates: bool
    delayed: bool


def _flag(ad: classad2.ClassAd, name: str, default: bool) -> bool:
    value = evaluate(ad, name, default)
    return value if isinstance(value, bool) else default


def plan(ad: classad2.ClassAd, scratch: list[Path], account: Account | None) -> ChirpPlan | None:
    """The chirp servers of a run of ``ad`` (None: it has none)."""
    files = _flag(ad, "WantIOProxy", False)
    updates = _flag(ad, "WantRemoteUpdates", files)
    if not (files or updates):
        return None
    return ChirpPlan(tuple(scratch), account, files, updates, _flag(ad, "WantDelayedUpdates", True))


def add_to_environment(environment: dict[str, str], scratch: Path, libexec: Path, chirp: bool) -> None:
    """Put the job's tools first on its ``PATH`` and, when it has a chirp server, name its ``.chirp.config``."""
    path = environment.get("PATH", "/usr/local/bin:/usr/bin:/bin")
    environment["PATH"] = f"{libexec}:{path}" if path else str(libexec)
    if chirp:
        environment["_CONDOR_CHIRP_CONFIG"] = str(scratch / CONFIG_NAME)

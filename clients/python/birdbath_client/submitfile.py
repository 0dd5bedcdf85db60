"""Submit description files to job ads, with condor_submit's own translation (the v1 ``htcondor.Submit`` of the
HTCondor 24.0 LTS wheel, offline).  Relative paths are taken from the submit file's directory."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .ads import Expr

os.environ.setdefault("CONDOR_CONFIG", "/dev/null")

#: attributes condor_submit fills that the schedd sets itself at commit
SCHEDD_OWNED = {"ClusterId", "ProcId", "QDate", "EnteredCurrentStatus", "MyType", "TargetType", "Owner"}


def job_ads(path: Path) -> list[dict[str, Any]]:
    """One ad per proc the submit file queues (``queue``, ``queue N``, ``queue ... from/in/matching``)."""
    import htcondor

    description = htcondor.Submit(path.read_text())
    if not any(key.lower() == "initialdir" for key in description.keys()):
        description["initialdir"] = str(path.resolve().parent)
    executable = next((key for key in description.keys() if key.lower() == "executable"), None)
    if executable and not os.path.isabs(description[executable]):
        description[executable] = str(path.resolve().parent / description[executable])
    items = list(description.itemdata() or [])
    if items:
        ads = description.jobs(itemdata=iter(items), clusterid=1)
    else:
        arguments = description.getQArgs().strip()
        ads = description.jobs(count=int(arguments) if arguments.isdigit() else 1, clusterid=1)
    return [_plain(ad) for ad in ads]


def _plain(ad: Any) -> dict[str, Any]:
    """A v1 ClassAd as typed Python values (expressions as :class:`Expr`), minus what the schedd assigns."""
    import classad

    result: dict[str, Any] = {}
    for name in ad.keys():
        if name in SCHEDD_OWNED:
            continue
        value = ad[name]
        if isinstance(value, classad.Value):  # undefined/error literals: nothing to send
            continue
        if isinstance(value, classad.ExprTree):
            result[name] = Expr(str(value))
        elif isinstance(value, (bool, int, float, str)):
            result[name] = value
    return result

"""condor_submit as the oracle of ``birdbath submit``'s translation: for each submit file of the corpus
(``tests/data/submit``, ours and HTCondor's own test files), the job ads the client library makes
(:func:`birdbath_client.submitfile.clusters`, what ``birdbath submit`` sends) against ``condor_submit -dump`` of the
same file, attribute by attribute.  Needs HTCondor's condor_submit (``BIRDBATH_HTCONDOR`` or PATH; skipped saying
why without); no daemon runs.

What differs on purpose is listed below, each with its reason (and in README.md, "condor_submit and birdbath
submit"); anything else fails the test."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import classad2
import pytest

from tests.conftest import DATA
from tests.live_pool import release_or_skip

CORPUS = DATA / "submit"
FILES = sorted([*CORPUS.glob("*.sub"), *(CORPUS / "htcondor").glob("*.cmd")])

#: what the schedd sets when the job is queued (condor_submit -dump shows the values it would send)
SCHEDD_ASSIGNED = {"clusterid", "procid", "qdate", "enteredcurrentstatus", "mytype", "targettype", "owner",
                   "jobstatus"}
#: who made the ad: condor_submit says its own version, file and method; the client the 24.0 bindings' version and
#: JobSubmitMethod 2 (the Python bindings)
THE_TOOL = {"condorversion", "condorplatform", "submitversion", "jobsubmitfile", "jobsubmitmethod"}
#: defaults HTCondor 25 changed after the 24.0 LTS the client translates with: the disk and memory a job asks for
#: when its file does not say (25: from the input's size and 128 MB; 24: DiskUsage and the memory it used), the
#: input size rounded up to a whole MB, and the disk clause of the default Requirements, which 25 skips for execute
#: nodes of 25.12 and newer
NEWER_DEFAULTS = {"requestdisk", "requestmemory", "transferinputsizemb"}
_DISK_CLAUSE_25 = '(versionGE(split(TARGET.CondorVersion)[1],"25.12.0") || (TARGET.Disk >= RequestDisk))'
_DISK_CLAUSE_24 = "(TARGET.Disk >= RequestDisk)"


def dumped(path: Path, release: Path, tmp: Path) -> list[dict[str, str]]:
    """condor_submit's job ads for the file, as ``-dump`` writes them: the first ad whole, the next ones as what
    differs from it."""
    out = tmp / f"{path.name}.dump"
    done = subprocess.run([str(release / "bin" / "condor_submit"), "-dump", str(out), path.name], cwd=path.parent,
                          capture_output=True, text=True, env=dict(os.environ, CONDOR_CONFIG="/dev/null"),
                          check=False)
    assert done.returncode == 0, done.stderr
    ads: list[dict[str, str]] = []
    for block in (block for block in out.read_text().split("\n\n") if block.strip()):
        ad = dict(ads[0]) if ads else {}
        parsed = classad2.parseOne(block.strip() + "\n", classad2.ParserType.Old)  # -dump: the old syntax
        ad.update({name: str(parsed.lookup(name)) for name in parsed})
        ads.append(ad)
    return ads


def ours(path: Path) -> list[dict[str, Any]]:
    from birdbath_client.submitfile import clusters

    return [ad for cluster in clusters(path) for ad in cluster.ads(1)]


def written(value: Any) -> str:
    """The ClassAd text of a value of the client's ads (expressions keep their text)."""
    from birdbath_client.ads import Expr

    if isinstance(value, Expr):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return classad2.quote(value) if isinstance(value, str) else repr(value)


def canonical(name: str, text: str) -> str:
    """One text for a value whatever side wrote it (classad2's unparse), the 25 disk clause as 24's, and an
    environment copied by ``getenv`` without the terminal's size (HTCondor 25's condor_submit leaves ``COLUMNS``
    and ``LINES`` out)."""
    unparsed = str(classad2.ExprTree(text))
    if name == "requirements":
        return unparsed.replace(_DISK_CLAUSE_25, _DISK_CLAUSE_24)
    if name == "environment":
        return " ".join(word for word in unparsed.split(" ") if not re.match(r'"?(COLUMNS|LINES)=', word))
    return unparsed


def differences(theirs: dict[str, str], mine: dict[str, Any], asked: set[str]) -> list[str]:
    """What differs but on purpose; ``asked``: the attributes the file sets itself (``request_disk`` ...)."""
    left = {name.lower(): (name, value) for name, value in theirs.items()}
    right = {name.lower(): (name, written(value)) for name, value in mine.items()}
    skipped = SCHEDD_ASSIGNED | THE_TOOL | (NEWER_DEFAULTS - asked)
    found = []
    for key in sorted((left.keys() | right.keys()) - skipped):
        theirs_text = canonical(key, left[key][1]) if key in left else None
        ours_text = canonical(key, right[key][1]) if key in right else None
        if theirs_text != ours_text:
            found.append(f"{(left.get(key) or right[key])[0]}: condor_submit {theirs_text} / birdbath {ours_text}")
    return found


@pytest.mark.filterwarnings("ignore:your Requirements expression refers to TARGET.Memory")  # policy.sub, on purpose
@pytest.mark.parametrize("path", FILES, ids=[path.name for path in FILES])
def test_birdbath_submit_makes_the_ads_condor_submit_makes(path, tmp_path):
    release = release_or_skip()
    theirs, mine = dumped(path, release, tmp_path), ours(path)
    assert len(theirs) == len(mine)
    asked = {name.lower().replace("_", "") for name in
             re.findall(r"^\s*(request_\w+)\s*=", path.read_text(), re.IGNORECASE | re.MULTILINE)}
    for proc, (their_ad, my_ad) in enumerate(zip(theirs, mine)):
        found = differences(their_ad, my_ad, asked)
        assert found == [], f"job {proc} of {path.name}:\n" + "\n".join(found)

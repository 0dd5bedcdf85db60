"""The real HTCondor pool the live tests share (gateway/testing_htcondor.py): started once per test session from
the install ``BIRDBATH_HTCONDOR`` names (or ``condor_master`` on ``PATH``); the tests that need it skip saying why
where there is none."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.testing_htcondor import PersonalPool, find_release

#: what the live tests need of the pool besides a personal pool's knobs: the startd's cores offered to the schedd's
#: dedicated scheduler (the parallel universe), and a submit requirement to refuse one cluster of a transaction
#: with (a job whose Tag is "refused")
LIVE_CONFIG = """\
DedicatedScheduler = "DedicatedScheduler@$(FULL_HOSTNAME)"
STARTD_ATTRS = $(STARTD_ATTRS) DedicatedScheduler
SUBMIT_REQUIREMENT_NAMES = NotRefused
SUBMIT_REQUIREMENT_NotRefused = Tag =!= "refused"
SUBMIT_REQUIREMENT_NotRefused_REASON = "Tags may not be refused"
"""


def release_or_skip() -> Path:
    release, reason = find_release()
    if release is None:
        pytest.skip(reason)
    return release


def open_release_or_fail(release: Path) -> Path:
    """The install, which the pool's jobs use too: they run as other accounts and start condor_dagman and
    condor_chirp from it."""
    closed = [str(path) for path in (release, *release.parents) if not path.stat().st_mode & 0o001]
    if closed:
        pytest.fail(f"the HTCondor install {release} is not open to other users ({closed[0]} is closed to them): the "
                    "pool's jobs run as other accounts and start condor_dagman and condor_chirp from it")
    return release


def traversable_directory(prefix: str) -> Path:
    """A directory under /tmp that the jobs' account (``nobody``) may traverse: pytest's are root's alone, and the
    schedd writes a job's spool, the starter its sandbox, as the job's owner."""
    directory = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    directory.chmod(0o755)
    return directory


@pytest.fixture(scope="session")
def live_pool() -> Iterator[PersonalPool]:
    """One personal pool (collector, negotiator, schedd, a startd of 4 cores) for the session."""
    release = open_release_or_fail(release_or_skip())
    directory = traversable_directory("birdbath-pool-")
    pool = PersonalPool(release, directory, extra_config=LIVE_CONFIG)
    try:
        pool.start()
        yield pool
    finally:
        pool.stop()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def live_state() -> Iterator[Path]:
    """A gateway's state directory the pool's jobs can read their files from (it is their submit-side Iwd)."""
    directory = traversable_directory("birdbath-live-")
    yield directory
    shutil.rmtree(directory, ignore_errors=True)

"""condor_q's default view since 8.5, one line per batch: the jobs of a ``JobBatchName``, of a DAG (its node jobs,
by ``DAGManJobId``), or of a cluster, with how many are done, running, idle and held, and their ids."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from .jobs import JobStatus
from .tables import SUBMITTED, is_dagman, totals

Ad = Mapping[str, Any]
HEADER = ("OWNER", "BATCH_NAME", "SUBMITTED", "DONE", "RUN", "IDLE", "HOLD", "TOTAL", "JOB_IDS")


@dataclass
class Batch:
    owner: str
    name: str
    jobs: list[Ad] = field(default_factory=list)
    dagman: Ad | None = None

    def count(self, status: JobStatus) -> int:
        return sum(1 for ad in self.jobs if JobStatus.of(ad) is status)

    @property
    def submitted(self) -> Ad:
        return self.dagman or self.jobs[0]

    def job_ids(self) -> str:
        """"12.0", "12.0-4" (one cluster), or "12.0 ... 14.2" (several)."""
        ids = sorted((int(ad.get("ClusterId", 0)), int(ad.get("ProcId", 0))) for ad in self.jobs or [self.submitted])
        (first_cluster, first_proc), (last_cluster, last_proc) = ids[0], ids[-1]
        if ids[0] == ids[-1]:
            return f"{first_cluster}.{first_proc}"
        if first_cluster == last_cluster:
            return f"{first_cluster}.{first_proc}-{last_proc}"
        return f"{first_cluster}.{first_proc} ... {last_cluster}.{last_proc}"


def batches(ads: Iterable[Ad]) -> list[Batch]:
    """The batches of these jobs, in the order their first job was submitted."""
    found: dict[tuple[str, str], Batch] = {}
    for ad in sorted(ads, key=lambda ad: (ad.get("ClusterId", 0), ad.get("ProcId", 0))):
        owner = str(ad.get("Owner", ""))
        if ad.get("JobBatchName"):
            name = str(ad["JobBatchName"])
        elif is_dagman(ad):
            name = f"DAG: {ad.get('ClusterId')}"
        elif ad.get("DAGManJobId") is not None:
            name = f"DAG: {ad.get('DAGManJobId')}"
        else:
            name = f"ID: {ad.get('ClusterId')}"
        batch = found.setdefault((owner, name), Batch(owner, name))
        if is_dagman(ad):
            batch.dagman = ad
        else:
            batch.jobs.append(ad)
    return list(found.values())


def _count(number: int) -> str:
    return str(number) if number else "_"


def view(ads: list[Ad], everyone: list[Ad], schedd: str, now: float | None = None) -> Iterator[str]:
    """The lines condor_q prints: the ``-- Schedd:`` header, a line per batch, and the totals for the query and
    for all users (``everyone``: every queued job)."""
    now = time.time() if now is None else now
    found = batches(ads)
    held = any(batch.count(JobStatus.HELD) for batch in found)
    columns = [name for name in HEADER if name != "HOLD" or held]
    rows = []
    for batch in found:
        cells = {"OWNER": batch.owner, "BATCH_NAME": batch.name,
                 "SUBMITTED": SUBMITTED.text(batch.submitted, now),
                 "DONE": _count(batch.count(JobStatus.COMPLETED)), "RUN": _count(batch.count(JobStatus.RUNNING)),
                 "IDLE": _count(batch.count(JobStatus.IDLE)), "HOLD": _count(batch.count(JobStatus.HELD)),
                 "TOTAL": _count(len(batch.jobs)), "JOB_IDS": batch.job_ids()}
        rows.append([cells[name] for name in columns])
    widths = [max([len(name)] + [len(row[index]) for row in rows]) for index, name in enumerate(columns)]
    yield ""
    yield f"-- Schedd: {schedd} @ {time.strftime('%m/%d/%y %H:%M:%S', time.localtime(now))}"
    for row in [columns, *rows]:
        yield " ".join(cell.ljust(width) if index < 2 else cell.rjust(width)
                       for index, (cell, width) in enumerate(zip(row, widths)) if columns[index] != "JOB_IDS") \
              + " " + row[-1]
    yield ""
    yield f"Total for query: {totals(ads)}"
    yield f"Total for all users: {totals(everyone)}"

"""Jobs from a submit description (or one ad), submitted in one Birdbath transaction that stays open while some of
them wait for input files from the client.

The REST face submits this way (``POST /api/v1/jobs``, then ``PUT .../input``).  What waits lives here, in the core,
beside the transaction it belongs to: the upload of a job's input may arrive on another connection (and, with
worker processes, in another process) than the submission did, and a front end keeps nothing between requests.
A submission whose jobs need nothing from the client is committed at once; otherwise its transaction's lease
(``staging_lifetime``) bounds the wait, and a transaction that expires is rolled back as any other, taking its
jobs' wait with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import classad2
from twisted.internet.threads import deferToThread

from jobmodel.submitfile import ClusterDescription, cluster_ads

from .adstruct import Attr, wire_value
from .auth import Caller
from .schedd import BirdbathSchedd
from .transactions import Transaction, TransactionRef

#: a job by its (cluster, proc)
JobKey = tuple[int, int]


class InputNotAwaited(LookupError):
    """An upload for a job that waits for no input from this caller (none was needed, it came already, or the
    submission's lease ended)."""


@dataclass(frozen=True)
class Submitted:
    """What a submission made: its first cluster, every job's id, and those still waiting for their input."""

    first_cluster: int
    job_ids: list[str]
    awaiting_input: list[str]


@dataclass(frozen=True)
class AwaitedInput:
    """The jobs of one open submission an upload is for, and the transaction to stage their files in."""

    ref: TransactionRef
    jobs: list[JobKey]


@dataclass
class _Waiting:
    txn: Transaction
    caller: Caller
    jobs: set[JobKey] = field(default_factory=set)

    @property
    def ref(self) -> TransactionRef:
        return TransactionRef(self.txn.id, self.txn.duration)


class DescribedSubmissions:
    """Submissions from descriptions, and the jobs of theirs that still wait for their input (by cluster)."""

    def __init__(self, schedd: BirdbathSchedd, lease: int) -> None:
        self.schedd = schedd
        self.lease = lease
        self._waiting: dict[int, _Waiting] = {}

    async def submit(self, caller: Caller, descriptions: list[ClusterDescription] | None = None,
                     ad: list[Attr] | None = None) -> Submitted:
        """The clusters of ``descriptions`` (translated off the reactor, with the ids the schedd gives), or one job
        of ``ad``, made in one transaction; committed now unless a job needs files the client must send.
        SubmitDescriptionError for what condor_submit refuses; nothing is left behind by a failure."""
        txn = await self.schedd.begin_transaction(caller, self.lease)
        waiting = _Waiting(txn, caller)
        ids: list[str] = []
        first = 0
        try:
            for description in descriptions if descriptions is not None else [None]:
                cluster = await self.schedd.new_cluster(caller, waiting.ref)
                first = first or cluster
                jobs = [ad or []] if description is None else await _translated(description, cluster)
                for attrs in jobs:
                    proc = await self.schedd.new_job(caller, waiting.ref, cluster)
                    await self.schedd.submit(caller, waiting.ref, cluster, proc, attrs)
                    ids.append(f"{cluster}.{proc}")
                    if needs_input(attrs):
                        waiting.jobs.add((cluster, proc))
            if waiting.jobs:
                self._forget_expired()
                for cluster in {cluster for cluster, _ in waiting.jobs}:
                    self._waiting[cluster] = waiting
            else:
                await self.schedd.commit_transaction(caller, waiting.ref)
        except BaseException:
            await self._abort(caller, waiting)
            raise
        return Submitted(first, ids, [f"{cluster}.{proc}" for cluster, proc in sorted(waiting.jobs)])

    async def start_input(self, caller: Caller, cluster: int, proc: int | None) -> AwaitedInput:
        """The jobs of ``cluster`` (or its job ``proc``) waiting for input from ``caller`` (InputNotAwaited), with
        nothing staged for them: what an earlier upload staged is discarded (one cut short by a dropped connection
        or a worker killed mid-way would otherwise make every upload sent again find its files declared)."""
        self._forget_expired()
        waiting = self._waiting.get(cluster)
        if waiting is None or waiting.caller != caller:
            raise InputNotAwaited("input is taken between a submission that needs it and the end of its lease, "
                                  "from the caller that submitted it")
        jobs = sorted(key for key in waiting.jobs if key[0] == cluster and (proc is None or key[1] == proc))
        if not jobs:
            raise InputNotAwaited("it has had its input")
        await self.schedd.restage(waiting.txn, jobs)
        return AwaitedInput(waiting.ref, jobs)

    async def received(self, caller: Caller, awaited: AwaitedInput) -> list[str]:
        """The input of ``awaited`` is staged: when no job of the submission waits any more, it is committed, and
        the ids of all its jobs are answered (empty while some still wait)."""
        waiting = self._waiting.get(awaited.jobs[0][0])
        if waiting is None or waiting.caller != caller or waiting.txn.id != awaited.ref.id:
            raise InputNotAwaited("the submission's lease ended while its input arrived")
        waiting.jobs.difference_update(awaited.jobs)
        if waiting.jobs:
            return []
        for cluster in [cluster for cluster, held in self._waiting.items() if held is waiting]:
            del self._waiting[cluster]
        await self.schedd.commit_transaction(caller, waiting.ref)
        return sorted(f"{cluster}.{proc}" for cluster, proc in waiting.txn.jobs)

    def _forget_expired(self) -> None:
        """Drop the submissions whose transaction ended (rolled back by the core) before their input came."""
        for cluster, waiting in list(self._waiting.items()):
            if waiting.txn not in self.schedd.transactions:
                del self._waiting[cluster]

    async def _abort(self, caller: Caller, waiting: _Waiting) -> None:
        if waiting.txn in self.schedd.transactions:
            await self.schedd.abort_transaction(caller, waiting.ref)


async def _translated(description: ClusterDescription, cluster: int) -> list[list[Attr]]:
    """A cluster's job ads from its description (condor_submit's translation, off the reactor), as typed
    attributes."""
    return [ad_attrs(ad) for ad in await deferToThread(cluster_ads, description, cluster)]


def ad_attrs(ad: classad2.ClassAd) -> list[Attr]:
    """An ad the gateway built (a translated description, the DAGMan job) as the typed attributes submit takes."""
    return [Attr(name, *typed) for name, value in ad.items() if (typed := wire_value(ad, name, value))]


def needs_input(attrs: list[Attr]) -> bool:
    """Whether a job reads files the client must send: a relative executable it transfers, a relative standard
    input, or transfer_input_files that are not URLs."""
    values = {attr.name.lower(): attr.value for attr in attrs}
    relative = [values.get("in", "/dev/null")]
    if values.get("transferexecutable", "TRUE").upper() != "FALSE":
        relative.append(values.get("cmd", "/"))
    if any(value and value != "/dev/null" and not value.startswith("/") for value in relative):
        return True
    return any(name.strip() and "://" not in name for name in values.get("transferinput", "").split(","))

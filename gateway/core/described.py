"""Jobs from a submit description (or one ad), submitted in one whole transaction of the core
(``BirdbathSchedd.submit_transaction``), which stays open as a Birdbath transaction while some of them wait for
input files from the client.

The REST face submits this way (``POST /api/v1/jobs``, then ``PUT .../input``).  What waits lives here, in the core,
beside the transaction it belongs to: the upload of a job's input may arrive on another connection (and, with
worker processes, in another process) than the submission did, and a front end keeps nothing between requests.
A submission whose jobs need nothing from the client is committed at once; otherwise its transaction's lease
(``staging_lifetime``) bounds the wait, and a transaction that expires is rolled back as any other, taking its
jobs' wait with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from jobmodel.submitfile import ClusterDescription

from .adstruct import Attr
from .auth import Caller
from .schedd import BirdbathSchedd
from .transactions import NewCluster, Transaction, TransactionRef, WholeTransaction

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
        """The clusters of ``descriptions`` (translated by the core with the ids it gives), or one job of ``ad``,
        made in one whole transaction (``BirdbathSchedd.submit_transaction``); committed now unless a job needs
        files the client must send.  SubmitDescriptionError for what condor_submit refuses; nothing is left behind
        by a failure."""
        clusters = [NewCluster(described=description) for description in descriptions] \
            if descriptions is not None else [NewCluster([ad or []])]
        made = await self.schedd.submit_transaction(caller, WholeTransaction(clusters, input_lease=self.lease))
        if made.transaction is not None:
            txn = self.schedd.transactions.held(made.transaction, caller)
            assert txn is not None  # (opened by the call just made, on this reactor turn)
            waiting = _Waiting(txn, caller, set(made.awaiting))
            self._forget_expired()
            for cluster in {cluster for cluster, _ in waiting.jobs}:
                self._waiting[cluster] = waiting
        return Submitted(made.jobs[0][0], [f"{cluster}.{proc}" for cluster, proc in made.jobs],
                         [f"{cluster}.{proc}" for cluster, proc in sorted(made.awaiting)])

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

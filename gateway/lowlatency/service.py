"""Low-latency jobs: a message becomes a job through the core's submission service, and the job's life goes back
to the message's reply_to.

A delivery is taken only while this gateway has a free low-latency slot (the consumer is cancelled when it has
none), and is acked only once its job is committed: a crash before that leaves the message to the broker, which
redelivers it here or to another gateway; a crash after the commit but before the ack is recognised by the
message_id, which the job keeps (``AMQPID``).  Another gateway cannot recognise it: a job made from a redelivered
message marks its final ``AMQPResent``, since the gateway that had the message may have committed it first.  Every
other message gets one error reply or goes to the rejected queue, and is acked: nothing loops, nothing is dropped
silently.

The jobs are ordinary jobs of the one queue.  The service follows the ones it has not finished with (no confirmed
final reply) by reading their ads through the core, often while one waits to start and less often after; a final
reply confirmed by the broker is recorded on the job (``AMQPFinalSent``), so a restarted gateway sends the finals
it still owes, marking with ``AMQPResent`` those that may have gone out before.
"""

from __future__ import annotations

import os
import pwd
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import classad2
import pika
from pika.exceptions import UnroutableError
from twisted.internet.defer import ensureDeferred
from twisted.internet.threads import deferToThread
from twisted.logger import Logger

from gateway.core.adstruct import Attr, AttrType, BadAttribute, struct_to_ad
from gateway.core.auth import Authentication, Caller
from gateway.core.collector import BirdbathCollector
from gateway.core.schedd import BirdbathSchedd
from gateway.core.status import BirdbathError, StatusCode
from gateway.core.submissions import ApiError, ApiStatus, JobRef, SubmissionService
from gateway.core.transactions import InputFile, NewCluster, WholeTransaction
from jobmodel.jobs import JobAction, JobStatus
from jobmodel.pool import AdType

from .archive import input_files, results_zip
from .broker import Broker, Link, NotConnected
from .codec import (
    AMQP_FINAL_SENT,
    AMQP_ID,
    AMQP_REDELIVERED,
    AMQP_REPLY_TO,
    NO_MESSAGE_ID,
    BadMessage,
    ReplyAddress,
    error_body,
    error_headers,
    job_message,
    reply_address,
    reply_headers,
)
from .redeliveries import Redeliveries
from .settings import CarodSettings

log = Logger()

#: seconds between two looks at a job that waits to start; one that runs is looked at as often at first, then
#: less and less often (a tenth of how long it has run), up to RUNNING_POLL
WAITING_POLL = 0.005
RUNNING_POLL = 1.0
#: bytes read from a spool file at once for the results
CHUNK = 1 << 20


@dataclass(eq=False)
class Tracked:
    """A job this gateway owes replies for."""

    ref: JobRef
    caller: Caller
    message_id: str
    address: ReplyAddress
    resent: bool = False  # its final may repeat one sent before: by this gateway before a restart, or by another
    running_sent: bool = False
    next_update: float = 0.0
    sending: bool = False  # a final reply is on its way
    #: a poll is reading its ad (polls overlap while one awaits: another looking too would send its final twice)
    looking: bool = False
    next_look: float = 0.0
    ended: bool = False  # its run is over (completed, removed, held): its slot is free, its final may be owed
    running_since: float | None = None


@dataclass
class Counters:
    taken: int = 0
    errors: int = 0
    rejected: int = 0
    finals: int = 0
    requeued: int = 0


class LowLatencyService:
    def __init__(self, reactor: Any, settings: CarodSettings, submissions: SubmissionService,
                 schedd: BirdbathSchedd, collector: BirdbathCollector, state_dir: Path) -> None:
        self._reactor = reactor
        self.settings = settings
        self._submissions = submissions
        self._schedd = schedd
        self._collector = collector
        self.broker = Broker(reactor, settings, self._on_delivery, self._on_up)
        #: a caller for the service's own reads (the queue's jobs are read by anyone, as getJobAds does)
        self._reader = Caller(settings.carod_broker_ip, None, Authentication.NONE)
        self._known: dict[str, JobRef] = {}  # message_id -> its job (jobs in the queue)
        self._tracked: dict[JobRef, Tracked] = {}
        self._taking = 0
        self._slots = 1
        self._machines: list[classad2.ClassAd] | None = None
        self._poller: Any = None
        self.counters = Counters()
        self._stopped = False
        self._redeliveries = Redeliveries(state_dir / "redeliveries")
        #: finished jobs stay queued for output_retention, for their final reply and for fetching their output
        self._retention = Attr("LeaveJobInQueue", AttrType.EXPRESSION,
                               f"(JobStatus == 3 || JobStatus == 4) && (time() - EnteredCurrentStatus)"
                               f" < {submissions.settings.output_retention}")
        self._requeued_for_slot: set[str] = set()  # message_ids sent back for lack of a slot (they don't count)

    # -- starting and stopping -----------------------------------------------------------------------------
    async def start(self) -> None:
        """Read what the queue holds of earlier low-latency jobs, then connect (in the background: the gateway
        serves SOAP whether or not the broker is up)."""
        await self._load_machines()
        ads = await self._schedd.get_job_ads(self._reader, None, f"{AMQP_ID} =!= undefined")
        for struct in ads:
            ad = struct.ad
            ref = JobRef(int(ad["ClusterId"]), int(ad["ProcId"]))
            message_id = ad.get(AMQP_ID)
            if isinstance(message_id, str):
                self._known[message_id] = ref
            if ad.get(AMQP_FINAL_SENT) is not True and isinstance(ad.get(AMQP_REPLY_TO), str):
                try:
                    address = reply_address(ad[AMQP_REPLY_TO])
                except BadMessage:
                    continue
                owner = ad.get("Owner")
                caller = Caller(self.settings.carod_broker_ip, owner if isinstance(owner, str) else None,
                                Authentication.BROKER)
                finished = _status(ad) in (JobStatus.COMPLETED, JobStatus.REMOVED, JobStatus.HELD)
                resent = finished or ad.get(AMQP_REDELIVERED) is True
                self._tracked[ref] = Tracked(ref, caller, str(message_id), address, resent=resent,
                                             running_sent=finished, ended=finished)
        if self._tracked:
            log.info("low-latency: {count} job(s) still owe their final reply", count=len(self._tracked))
        self.broker.start()
        self._schedule_poll(0)

    async def stop(self) -> None:
        self._stopped = True
        if self._poller is not None and self._poller.active():
            self._poller.cancel()
        await self.broker.stop()

    async def _load_machines(self) -> None:
        """This machine's slot ads: Requirements are checked against them, and their CPUs are the slots when
        carod_max_jobs is 0."""
        if not self._collector.has_pool:
            self._machines = None
            self._slots = self.settings.carod_max_jobs or 1
            return
        structs = await self._collector.query(self._reader, AdType.STARTD, None)
        self._machines = [struct_to_ad(struct) for struct in structs]
        cpus = [machine.get("TotalSlotCpus", machine.get("Cpus")) for machine in self._machines]
        self._slots = self.settings.carod_max_jobs or max(1, sum(n for n in cpus if isinstance(n, int)))

    # -- the consumer's gate ---------------------------------------------------------------------------------
    def _unfinished(self) -> int:
        return self._taking + sum(1 for tracked in self._tracked.values() if not tracked.ended)

    def _room(self) -> int:
        """How many jobs this gateway takes at most: its slots, and carod_prefetch more that wait for the next free
        slot (committed while the slots are busy, so that a slot that frees starts one at once instead of waiting
        for a take and its commit)."""
        return self._slots + self.settings.carod_prefetch

    def _gate(self) -> None:
        """Consume only while a job more would fit: an idle gateway pulls work, a busy one leaves it to others."""
        if not self._stopped:
            self.broker.consume(self._unfinished() < self._room())

    def _on_up(self) -> None:
        self._gate()
        self._schedule_poll(0)

    # -- deliveries ----------------------------------------------------------------------------------------
    async def _on_delivery(self, method: Any, properties: pika.BasicProperties, body: bytes, link: Link) -> None:
        if self._unfinished() >= self._room():
            link.requeue(method.delivery_tag)  # raced in before the cancel: another gateway, or later
            if properties.message_id:
                self._requeued_for_slot.add(properties.message_id)
            self.counters.requeued += 1
            self._gate()
            return
        self._taking += 1
        self._gate()
        try:
            await self._take(method, properties, body, link)
        except Exception as exc:  # noqa: BLE001 - never lost: the message goes to the rejected queue
            log.failure("low-latency: unexpected failure on message {id}", id=properties.message_id)
            await self._reject(properties, body, link, method, f"unexpected failure: {type(exc).__name__}: {exc}")
        finally:
            self._taking -= 1
            self._gate()

    async def _take(self, method: Any, properties: pika.BasicProperties, body: bytes, link: Link) -> None:
        message_id = properties.message_id or None
        if not properties.reply_to:
            await self._reject(properties, body, link, method, "the message has no reply_to")
            return
        try:
            address = reply_address(properties.reply_to)
        except BadMessage as exc:
            await self._reject(properties, body, link, method, str(exc))
            return
        if message_id is None:
            await self._error(address, properties, body, link, method, NO_MESSAGE_ID)
            return
        if message_id in self._known:
            if method.redelivered:  # committed before a crash, not acked: the job exists and will answer
                link.ack(method.delivery_tag)
            else:
                await self._error(address, properties, body, link, method,
                                  f"message_id {message_id!r} is already a job here "
                                  f"({self._known[message_id]}): give each job its own")
            return
        counted = method.redelivered and message_id not in self._requeued_for_slot
        self._requeued_for_slot.discard(message_id)
        if counted:
            count = await deferToThread(self._redeliveries.bump, message_id)
            if count > self.settings.carod_max_redeliveries:
                await self._reject(properties, body, link, method,
                                   f"redelivered {count} times without becoming a job (carod_max_redeliveries "
                                   f"{self.settings.carod_max_redeliveries}): it may crash the gateway")
                await deferToThread(self._redeliveries.forget, message_id)
                return
        try:
            caller, attributes, files = self._job(properties, body, message_id, address)
            if counted:
                attributes.append(Attr(AMQP_REDELIVERED, AttrType.BOOLEAN, "true"))
            self._check_requirements(attributes)
            ref = await self._submit(caller, attributes, files)
        except (BadMessage, ApiError, BirdbathError) as exc:
            await self._error(address, properties, body, link, method, _reason(exc))
            return
        finally:
            if counted:
                await deferToThread(self._redeliveries.forget, message_id)
        self._known[message_id] = ref
        self._tracked[ref] = Tracked(ref, caller, message_id, address, resent=counted)
        self.counters.taken += 1
        link.ack(method.delivery_tag)  # after the durable commit, never before
        self._schedule_poll(0)

    def _job(self, properties: pika.BasicProperties, body: bytes, message_id: str,
             address: ReplyAddress) -> tuple[Caller, list[Attr], list[InputFile]]:
        message = job_message(properties.headers)
        owner = self._owner(properties.user_id, message.owner)
        caller = Caller(self.settings.carod_broker_ip, owner, Authentication.BROKER)
        attributes = list(message.attributes)
        attributes += [Attr(AMQP_ID, AttrType.STRING, message_id), Attr(AMQP_REPLY_TO, AttrType.STRING, str(address))]
        if message.owner is not None:
            attributes.append(Attr("Owner", AttrType.STRING, message.owner))
        files = input_files(body or b"", self.settings.carod_max_input_bytes)
        return caller, attributes, files

    def _owner(self, user_id: str | None, header: str | None) -> str:
        """Who the job runs as: the broker-checked user_id when it is an account here, else carod_default_owner;
        with carod_trust_owner_header, an Owner header's account (carod's old trust).  Never root."""
        if self.settings.carod_trust_owner_header and header:
            owner = header
        elif user_id and _account(user_id) is not None:
            owner = user_id
        else:
            owner = self.settings.carod_default_owner
        account = _account(owner)
        if account is None:
            raise BadMessage(f"the job's owner {owner!r} is not an account on this machine")
        if account.pw_uid == 0:
            raise BadMessage(f"low-latency jobs never run as root (owner {owner!r})")
        return owner

    def _check_requirements(self, attributes: list[Attr]) -> None:
        """Requirements evaluated against this machine: a job no slot here can run is refused now, not left idle
        (a pool of different machines uses one queue per kind)."""
        if not self._machines:
            return
        try:
            ad = struct_to_ad(attributes, self._submissions.settings.limits)
        except BadAttribute as exc:
            raise BadMessage(str(exc)) from None
        ad["JobStatus"] = int(JobStatus.IDLE)
        if not any(machine.matches(ad) for machine in self._machines):  # the job's Requirements, against it
            text = next((a.value for a in attributes if a.name.lower() == "requirements"), "TRUE")
            raise BadMessage(f"Requirements {text} are false on this machine")

    async def _submit(self, caller: Caller, attributes: list[Attr], files: list[InputFile]) -> JobRef:
        """The job in one whole transaction of the core (``BirdbathSchedd.submit_transaction``): a new cluster of
        one job, its input files in its spool (its sandbox, which becomes its Iwd), committed (durable when it
        returns) or refused with nothing left behind, in one trip to the backend's thread."""
        made = await self._schedd.submit_transaction(caller, WholeTransaction(
            [NewCluster([[*attributes, self._retention]], files)]))
        return JobRef(*made.jobs[0])

    # -- errors and the rejected queue ------------------------------------------------------------------------
    async def _error(self, address: ReplyAddress, properties: pika.BasicProperties, body: bytes, link: Link,
                     method: Any, reason: str) -> None:
        """One error reply (carod's ``ERROR:`` body, an ``Error`` header), then the ack; when the reply cannot be
        routed the message goes to the rejected queue instead."""
        self.counters.errors += 1
        reply = pika.BasicProperties(message_id=str(uuid.uuid4()), correlation_id=properties.message_id,
                                     delivery_mode=2, headers=error_headers(reason, properties.message_id))
        log.info("low-latency: message {id} refused: {reason}", id=properties.message_id, reason=reason)
        try:
            if not await self.broker.exchange_exists(address.exchange):
                raise UnroutableError([])
            await self.broker.publish(address.exchange, address.routing_key, error_body(reason), reply)
        except UnroutableError:
            await self._reject(properties, body, link, method, f"{reason} (and its error reply to {address} was "
                                                                 f"unroutable)")
            return
        link.ack(method.delivery_tag)

    async def _reject(self, properties: pika.BasicProperties, body: bytes, link: Link, method: Any,
                      reason: str) -> None:
        """A copy to the rejected queue with the reason in ``x-carod-error``, then the ack (not before: a copy
        that did not arrive leaves the message to be delivered again)."""
        self.counters.rejected += 1
        headers = dict(properties.headers or {})
        headers["x-carod-error"] = reason
        copy = pika.BasicProperties(message_id=properties.message_id, reply_to=properties.reply_to,
                                    correlation_id=properties.correlation_id, delivery_mode=2, headers=headers,
                                    content_type=properties.content_type)
        log.warn("low-latency: message {id} to {queue}: {reason}", id=properties.message_id,
                 queue=self.settings.rejected_queue, reason=reason)
        await self.broker.publish("", self.settings.rejected_queue, body or b"", copy)
        link.ack(method.delivery_tag)

    # -- following the jobs ------------------------------------------------------------------------------------
    def _schedule_poll(self, delay: float) -> None:
        if self._stopped:
            return
        if self._poller is not None and self._poller.active():
            if self._poller.getTime() <= self._reactor.seconds() + delay:
                return
            self._poller.cancel()
        self._poller = self._reactor.callLater(delay, lambda: ensureDeferred(self._poll()))

    async def _poll(self) -> None:
        self._poller = None
        now = self._reactor.seconds()
        soonest: float | None = None
        for tracked in list(self._tracked.values()):
            if tracked.sending or tracked.looking:
                continue
            if tracked.next_look <= now:
                tracked.looking = True
                try:
                    await self._look(tracked)
                except Exception:  # noqa: BLE001 - one job's trouble does not stop the others
                    log.failure("low-latency: following job {job}", job=str(tracked.ref))
                    tracked.next_look = now + 1.0
                finally:
                    tracked.looking = False
            if tracked.ref in self._tracked and not tracked.sending:
                soonest = tracked.next_look if soonest is None else min(soonest, tracked.next_look)
        if soonest is not None:
            self._schedule_poll(max(0.0, soonest - self._reactor.seconds()))

    async def _ad(self, tracked: Tracked) -> classad2.ClassAd | None:
        """The job's ad: from the queue, else from the history (a job that left at once, output_retention 0)."""
        try:
            return (await self._schedd.get_job_ad(tracked.caller, None, tracked.ref.cluster, tracked.ref.proc)).ad
        except BirdbathError as exc:
            if exc.status.code is not StatusCode.UNKNOWNJOB:
                raise
        try:
            return struct_to_ad(await self._submissions.job_ad(tracked.caller, str(tracked.ref)))
        except ApiError:
            return None

    async def _look(self, tracked: Tracked) -> None:
        ad = await self._ad(tracked)
        now = self._reactor.seconds()
        if ad is None:
            log.warn("low-latency: job {job} (message {id}) left the queue before its final reply",
                     job=str(tracked.ref), id=tracked.message_id)
            self._forget(tracked)
            return
        status = _status(ad)
        if status in (JobStatus.COMPLETED, JobStatus.REMOVED, JobStatus.HELD):
            if not tracked.ended:
                tracked.ended = True
                self._gate()  # its slot is free: the next message may come while this one's final goes out
            if not tracked.running_sent and status is JobStatus.COMPLETED:
                await self._running(tracked, ad)
            tracked.sending = True
            ensureDeferred(self._final(tracked, ad, status))
            return
        if status in (JobStatus.RUNNING, JobStatus.TRANSFERRING_OUTPUT, JobStatus.SUSPENDED):
            interval = self.settings.carod_update_interval
            if not tracked.running_sent or (interval and now >= tracked.next_update):
                await self._running(tracked, ad)
                tracked.next_update = now + interval
            if tracked.running_since is None:
                tracked.running_since = now
            tracked.next_look = now + min(RUNNING_POLL, max(WAITING_POLL, (now - tracked.running_since) / 10))
        else:
            tracked.next_look = now + WAITING_POLL

    async def _running(self, tracked: Tracked, ad: classad2.ClassAd) -> None:
        """A JobStatus 2 reply, best effort (a broker that is away misses it; the final is what counts)."""
        headers = reply_headers(ad, int(time.time()), JobStatus=int(JobStatus.RUNNING))
        for name in ("ExitCode", "ExitBySignal", "ExitSignal", "ExitStatus", "CompletionDate"):
            headers.pop(name, None)
        tracked.running_sent = True
        try:
            await self._send(tracked, headers, b"", None)
        except Exception as exc:  # noqa: BLE001
            log.info("low-latency: JobStatus 2 reply for {id} not sent ({error})", id=tracked.message_id,
                     error=exc)

    async def _final(self, tracked: Tracked, ad: classad2.ClassAd, status: JobStatus) -> None:
        """The last reply: the job ad, and for a completed job carod's JobState "Exited" and the results zip;
        recorded on the job once the broker confirms it.  A held job leaves the queue afterwards."""
        try:
            extra: dict[str, Any] = {}
            body = b""
            content_type = None
            if status is JobStatus.COMPLETED:
                extra["JobState"] = '"Exited"'
                body, problem = await self._results(tracked, ad)
                if problem:
                    extra["ResultsError"] = classad2.quote(problem)
                else:
                    content_type = "application/zip"
            if tracked.resent:
                extra["AMQPResent"] = "TRUE"
            headers = reply_headers(ad, int(time.time()), **extra)
            try:
                await self._send(tracked, headers, body, content_type)
            except UnroutableError:
                log.warn("low-latency: final reply for {id} to {address} was unroutable; dropped (the output "
                         "stays for output_retention)", id=tracked.message_id, address=str(tracked.address))
            self.counters.finals += 1
            await self._record_final(tracked, status)
            self._forget(tracked)
        except NotConnected:
            tracked.next_look = self._reactor.seconds() + 0.5
        except Exception as exc:  # noqa: BLE001 - tried again: the final is owed until confirmed
            log.warn("low-latency: final reply for {id} not confirmed ({error}); will try again",
                     id=tracked.message_id, error=f"{type(exc).__name__}: {exc}")
            tracked.resent = True  # it may have arrived after all
            tracked.next_look = self._reactor.seconds() + 0.5
        finally:
            tracked.sending = False
            self._schedule_poll(0.0)

    async def _record_final(self, tracked: Tracked, status: JobStatus) -> None:
        """The confirmed final on the job, so that a restart does not send it again; a held job then leaves the
        queue (carod's jobs did not stay held).  A job already gone from the queue needs neither."""
        try:
            await self._submissions.set_attribute(tracked.caller, str(tracked.ref), AMQP_FINAL_SENT,
                                                  AttrType.BOOLEAN, "true")
            if status is JobStatus.HELD:
                await self._submissions.act(tracked.caller, str(tracked.ref), JobAction.REMOVE,
                                            "held low-latency job: its final reply was sent")
        except ApiError as exc:
            if exc.code is not ApiStatus.NO_MATCH:
                raise

    def _forget(self, tracked: Tracked) -> None:
        self._tracked.pop(tracked.ref, None)
        self._gate()

    async def _send(self, tracked: Tracked, headers: dict[str, Any], body: bytes,
                    content_type: str | None) -> None:
        if not await self.broker.exchange_exists(tracked.address.exchange):
            raise UnroutableError([])
        properties = pika.BasicProperties(message_id=str(uuid.uuid4()), correlation_id=tracked.message_id,
                                          delivery_mode=2, headers=headers, content_type=content_type)
        await self.broker.publish(tracked.address.exchange, tracked.address.routing_key, body, properties)

    async def _results(self, tracked: Tracked, ad: classad2.ClassAd) -> tuple[bytes, str | None]:
        """carod's result zip: Out, Err and TransferOutput when the job names them (plain files of its sandbox),
        else every regular file of the sandbox; none over carod_max_result_bytes."""
        ref, caller = tracked.ref, tracked.caller
        spool = await self._schedd.list_spool(caller, None, ref.cluster, ref.proc)
        sizes = {info.name: info.size for info in spool}
        named = [ad.get("Out"), ad.get("Err")]
        output = ad.get("TransferOutput")
        if isinstance(output, str):
            named += [part.strip() for part in output.split(",")]
        wanted = [os.path.basename(name) for name in named if isinstance(name, str) and name]
        chosen = [name for name in dict.fromkeys(wanted) if name in sizes] if any(wanted) else sorted(sizes)
        limit = self.settings.carod_max_result_bytes
        total = sum(sizes[name] for name in chosen)
        if total > limit:
            return b"", (f"the results are {total} bytes, over carod_max_result_bytes ({limit}); fetch them "
                         f"through the submission API or getFile")
        files = []
        for name in chosen:
            data = bytearray()
            while len(data) < sizes[name]:
                part = await self._schedd.get_file(caller, None, ref.cluster, ref.proc, name, len(data),
                                                   min(CHUNK, sizes[name] - len(data)))
                if not part:
                    break
                data += part
            files.append(InputFile(name, bytes(data)))
        return results_zip(files), None

    def stats(self) -> dict[str, int]:
        return {"tracked": len(self._tracked), "known": len(self._known), "taken": self.counters.taken,
                "errors": self.counters.errors, "rejected": self.counters.rejected, "finals": self.counters.finals,
                "requeued": self.counters.requeued}


def _reason(exc: Exception) -> str:
    """What a refusal says: the core's message (a status's text), or ours."""
    return getattr(exc, "text", None) or getattr(exc, "message", None) or str(exc)


def _status(ad: classad2.ClassAd) -> JobStatus:
    try:
        return JobStatus(int(ad.get("JobStatus", 1)))
    except (TypeError, ValueError):
        return JobStatus.IDLE


def _account(name: str) -> pwd.struct_passwd | None:
    try:
        return pwd.getpwnam(name)
    except (KeyError, UnicodeEncodeError, ValueError):
        return None

"""The link between a worker and the core: length-prefixed messages on a Unix socket pair, each a list encoded by
:mod:`gateway.workers.wire` whose first member says what it is (:class:`Message`).

A worker calls the core's services through one generic mechanism: :class:`RemoteObject` stands for a service of
the core and turns each call of a method its contract declares (:mod:`gateway.core.services`) into a CALL message;
the core runs that method of the service (:class:`CoreCalls`) and answers RESULT with its value or the exception it
raised.  Either end refuses a method the contract does not declare: a worker taken over by a hostile request reaches
no more of the core than the front ends' contracts.  The core passes each accepted connection to a worker as a CONNECTION message with the
socket attached (SCM_RIGHTS) and what the kernel said of its client when the core admitted it (the worker's
caller is made from that answer, not asked again); the worker says CLOSED when it has closed it, so that the core's
per-caller counts of connections stay right across workers.

Each end of a link encodes and decodes with its own :class:`~gateway.workers.wire.Codec`, whose tables let a job ad
cross once whole and then by reference while its revision holds (the core's ``repr`` of an ad and a worker's parsing
of it, for the same unchanged ads poll after poll, were a large share of their work): the link is ordered, so the two
ends of a direction keep the same table.  A message that fails to encode is not sent, and FORGET goes in its place,
so that the other end empties its table of received ads as this end emptied its table of sent ones.  A message that
cannot be read (such as a reference to an ad the table does not hold) raises out of :meth:`Link.dataReceived`, and
Twisted logs it and closes the link: a worker whose link ends stops, and the core starts another.

A worker begins transactions itself, from the ids and allowances the core grants it, and tells the core each it
began (IDS, ALLOW, BEGUN; the core's SYNC and RECLAIM: :mod:`gateway.core.grants`).

A worker counts the requests it serves itself; nothing crosses per request for the metrics: when /metrics is
scraped, the core asks each worker for its figures (SCRAPE) and adds the answers (FIGURES) to its own.

The framing is our own rather than Twisted's ``Int32StringReceiver`` (which copies its whole buffer for every
piece of a large message) or AMP (whose values are limited to 64 KiB, less than one getJobAds answer).
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred, fail
from twisted.internet.error import ConnectionLost
from twisted.internet.protocol import Protocol
from twisted.logger import Logger
from twisted.python.failure import Failure

from gateway.core.grants import Grants
from gateway.core.services import CONTRACTS, constants, operations
from gateway.workers import wire

log = Logger(namespace="birdbath.workers")

_LENGTH = struct.Struct("!I")

#: the largest message either side accepts (a getJobAds answer of 100,000 jobs is about 150 MB)
MAX_MESSAGE = 1 << 30


class Message(str, enum.Enum):
    CALL = "call"  # worker -> core: [CALL, id, service, method, args, kwargs]
    RESULT = "result"  # core -> worker: [RESULT, id, ok, value or exception]
    #: core -> worker: [CONNECTION, connection id, front end, address family, what the kernel said of its client]
    #: + socket
    CONNECTION = "connection"
    CLOSED = "closed"  # worker -> core: [CLOSED, connection id]
    READY = "ready"  # worker -> core: [READY], once it serves
    CONSTANTS = "constants"  # core -> worker, first: [CONSTANTS, {service: {attribute: value}}]
    SCRAPE = "scrape"  # core -> worker: [SCRAPE, id], /metrics is being read: send your figures
    FIGURES = "figures"  # worker -> core: [FIGURES, id, WorkerFigures], the answer to SCRAPE id
    #: either way: [FORGET], a message failed to encode here and was not sent, and the table of ads sent is empty:
    #: empty yours of ads received (``wire.Codec``)
    FORGET = "forget"
    # transactions begun in a worker (gateway.core.grants); IDS and ALLOW are answered by RESULT, as a CALL
    IDS = "ids"  # worker -> core: [IDS, id], a new block of transaction ids
    ALLOW = "allow"  # worker -> core: [ALLOW, id, caller], a new allowance of transactions for a caller
    BEGUN = "begun"  # worker -> core, one way: [BEGUN, transaction id, caller, duration], written before its answer
    SYNC = "sync"  # core -> worker: [SYNC, id], answer once all you sent before is read (an id the core lacks)
    SYNCED = "synced"  # worker -> core: [SYNCED, id]
    RECLAIM = "reclaim"  # core -> worker: [RECLAIM, id, caller], give back what is left of its allowance
    RECLAIMED = "reclaimed"  # worker -> core: [RECLAIMED, id, how many]


#: the attributes of the core's services that front ends read, fixed once the core has started (those their
#: contracts declare): sent to each worker when its link is made (every other use of a service is a call)
CONSTANTS = {service: names for service, contract in CONTRACTS.items() if (names := constants(contract))}
#: the methods of each service a worker may call (those its contract declares)
OPERATIONS = {service: operations(contract) for service, contract in CONTRACTS.items()}


class Link(Protocol):
    """One end of the link: encodes, frames and sends messages; decodes each it hears and hands it to
    ``handle_<kind>``."""

    def __init__(self, codec: wire.Codec | None = None) -> None:
        #: this end's encoding, with its tables of the job ads sent and received (a smaller one in tests)
        self.codec = codec if codec is not None else wire.Codec()
        self._buffer = bytearray()
        self._handlers: dict[str, Callable[..., None]] = {}
        #: true from the link's making to its loss
        self.alive = False

    def connectionMade(self) -> None:
        self.alive = True

    def connectionLost(self, reason: Failure | None = None) -> None:
        self.alive = False

    def send(self, kind: Message, *message: Any) -> None:
        """Send one message; raises what encoding it raised (Unencodable...), sending nothing of it, only FORGET."""
        self.write(self.encoded(kind, *message))

    def encoded(self, kind: Message, *message: Any) -> bytes:
        """One message, encoded to be written next (:meth:`write`); raises what encoding it raised, and FORGET is
        sent in its place (the table of sent ads is empty).  A message larger than :data:`MAX_MESSAGE`, which the
        other end would refuse by closing the link (and with it every connection of a worker), fails here alone:
        :class:`~gateway.workers.wire.MessageTooLarge`, the call whose answer it was fails, the link stays."""
        try:
            data = self.codec.encode([kind.value, *message])
            if len(data) > MAX_MESSAGE:
                self.codec.unsent()
                raise wire.MessageTooLarge(
                    f"a {'call' if kind is Message.CALL else 'message'} of {len(data):,} bytes is more than the link "
                    f"between the gateway's processes carries ({MAX_MESSAGE:,} bytes)"
                    + (": ask for fewer jobs at a time" if kind is Message.RESULT else ""))
            return data
        except Exception:
            self.write(self.codec.encode([Message.FORGET.value]))  # (this one cannot fail: it holds no value of ours)
            raise

    def write(self, data: bytes) -> None:
        """Write an encoded message (the next one :meth:`encoded` made: the tables follow the messages' order)."""
        self.transport.writeSequence((_LENGTH.pack(len(data)), data))  # (not joined: an answer may be large)

    def handle_forget(self) -> None:
        self.codec.forget()

    def dataReceived(self, data: bytes) -> None:
        """Decode each whole message straight from what arrived (a view, not a copy) and keep only the rest."""
        buffer = self._buffer
        if buffer:
            buffer += data
            source: bytes | bytearray = buffer
        else:
            source = data
        size, offset = len(source), 0
        try:
            while size - offset >= _LENGTH.size:
                (length,) = _LENGTH.unpack_from(source, offset)
                if length > MAX_MESSAGE:
                    log.error("a message of {length} bytes on the workers' link: closing it", length=length)
                    self.transport.loseConnection()
                    offset = size
                    return
                end = offset + _LENGTH.size + length
                if size < end:
                    return
                view = memoryview(source)[offset + _LENGTH.size:end]
                try:
                    message = self.codec.decode(view)
                finally:
                    view.release()  # (the buffer may change again)
                offset = end
                self._handler(message[0])(*message[1:])
        finally:
            if source is buffer:
                del buffer[:offset]
            elif offset < size:
                buffer += source[offset:]  # (memoryview-free: the buffer is empty, nothing else holds it)

    def _handler(self, kind: str) -> Callable[..., None]:
        """The method handling messages of ``kind``; a kind this end does not handle raises ValueError."""
        handler = self._handlers.get(kind)
        if handler is None:
            handler = self._handlers[kind] = getattr(self, f"handle_{Message(kind).value}")
        return handler


class CallingLink(Link):
    """The worker's end: calls the core and matches each RESULT to its call."""

    def __init__(self) -> None:
        super().__init__()
        self._next = 0
        self._pending: dict[int, Deferred[Any]] = {}

    def call(self, service: str, method: str, *args: Any, **kwargs: Any) -> Deferred[Any]:
        return self.request(Message.CALL, service, method, list(args), kwargs)

    def request(self, kind: Message, *fields: Any) -> Deferred[Any]:
        """Send ``[kind, id, *fields]``, the core's RESULT for that id answers."""
        if not self.alive:
            return fail(ConnectionLost("the gateway's core is gone"))
        self._next += 1
        call_id = self._next
        answer: Deferred[Any] = Deferred()
        self._pending[call_id] = answer
        try:
            self.send(kind, call_id, *fields)
        except Exception:  # noqa: BLE001 - an argument that cannot cross: the caller's failure
            del self._pending[call_id]
            return fail()
        return answer

    def handle_result(self, call_id: int, ok: bool, value: Any) -> None:
        answer = self._pending.pop(call_id)
        if ok:
            answer.callback(value)
        else:
            answer.errback(Failure(value))

    def connectionLost(self, reason: Failure | None = None) -> None:
        super().connectionLost(reason)
        pending, self._pending = self._pending, {}
        for answer in pending.values():
            answer.errback(Failure(ConnectionLost("the gateway's core is gone")))


class RemoteObject:
    """A service of the core as a worker's front ends see it: each call of a method its contract declares is a call
    over the link, answering a Deferred (the front ends await the core's coroutines already); any other name is an
    AttributeError here, as on the class the contract describes."""

    def __init__(self, link: CallingLink, service: str) -> None:
        self._link = link
        self._service = service
        self._operations = OPERATIONS[service]

    def set_constants(self, values: dict[str, Any]) -> None:
        self.__dict__.update(values)

    def __getattr__(self, method: str) -> Callable[..., Deferred[Any]]:
        if method not in self._operations:
            raise AttributeError(f"the core's {self._service} declares no {method} (gateway.core.services)")

        def call(*args: Any, **kwargs: Any) -> Deferred[Any]:
            return self._link.call(self._service, method, *args, **kwargs)

        call.__name__ = method
        self.__dict__[method] = call  # the next call finds it without __getattr__
        return call


class CoreCalls:
    """The core's side of the calls: the services workers may call, and only the methods their contracts declare
    (others of their classes, such as ``abort_all``, and attributes of an instance, such as its backend, are out of
    reach)."""

    def __init__(self, services: Callable[[], dict[str, Any]]) -> None:
        self._services = services

    def constants(self) -> dict[str, dict[str, Any]]:
        services = self._services()
        return {service: {name: getattr(services[service], name) for name in names}
                for service, names in CONSTANTS.items()}

    def grants(self) -> Grants | None:
        """The core's grants of transaction ids and allowances to the processes that begin transactions (None: a
        core without a schedd service, in tests of the pool)."""
        schedd = self._services().get("schedd")
        return None if schedd is None else schedd.grants

    def run(self, service: str, method: str, args: list[Any], kwargs: dict[str, Any]) -> Deferred[Any]:
        target = self._services().get(service)
        if target is None or method not in OPERATIONS.get(service, ()):
            return fail(wire.RemoteFailure(f"no operation {service}.{method} in the core"))
        try:  # (every declared method is a coroutine of the core: tests/test_workers_wire.py keeps it so)
            return Deferred.fromCoroutine(getattr(target, method)(*args, **kwargs))
        except Exception:  # noqa: BLE001 - whatever the service raises is the call's answer
            return fail()

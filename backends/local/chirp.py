"""A chirp server for each running node that asked for one: what condor_starter's I/O proxy does.

Each server listens on loopback, on a port of its own, and writes ``host port cookie`` to ``.chirp.config`` in the
node's scratch directory (as its owner, readable by the owner alone).  A connection must first present the cookie
(``cookie <c>``); anything else, or a wrong cookie (answered after a second, as the starter does), is answered
NOT_AUTHENTICATED.  Then it speaks Chirp version 2 as HTCondor's ``condor_chirp`` and the ``htchirp`` package do:

- the job ad: ``get_job_attr`` / ``set_job_attr`` go to the job in the queue through the backend's normal write
  path (durable, seen at once by every API and every node); ``set_job_attr_delayed`` keeps ``Chirp*`` attributes
  in the server (``get_job_attr_delayed`` reads them back) and writes them to the job when its run ends; ``ulog``
  appends a generic event to the job's user log;
- files (``open``/``read``/``write``/``close``..., ``getfile``, ``putfile``, ``unlink``, ``mkdir``, ``getdir``...)
  in the node's scratch directory only (``chirpfiles.py``), with the owner's rights.

Requests are answered one at a time per connection, in order.  Blocking work (the queue, the file system) runs off
the reactor: the queue on the backend's thread (``call``), files on the reactor's thread pool.
"""

from __future__ import annotations

import fnmatch
import hmac
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, Protocol

import classad2
from twisted.internet import protocol, task, threads
from twisted.internet.defer import Deferred, ensureDeferred
from twisted.logger import Logger

from . import chirpfiles
from .chirpconfig import CONFIG_NAME, ChirpPlan
from .owners import call_as, open_as, to_switch
from .quickio import write_all

log = Logger()
JobKey = tuple[int, int]

VERSION = 2
LINE_MAX = 5120  # CHIRP_LINE_MAX: a longer request is refused (TOO_BIG) and its connection closed
COOKIE_LENGTH = 31  # letters, as the starter's (32 bytes with the NUL)
WRONG_COOKIE_DELAY = 1.0
#: CHIRP_DELAYED_UPDATE_PREFIX and CHIRP_DELAYED_UPDATE_MAX_ATTRS (HTCondor's defaults)
DELAYED_PREFIX = "Chirp*"
DELAYED_MAX = 100
DELAYED_EXPRESSION_MAX = 993
READ_MAX = 1 << 20  # the most one read returns (a larger request gets a shorter answer, which chirp allows)
OPEN_MAX = 64  # open files per connection


class Status:
    """Chirp's answers (``chirp_protocol.h``)."""

    NOT_AUTHENTICATED = -1
    NOT_AUTHORIZED = -2
    DOESNT_EXIST = -3
    ALREADY_EXISTS = -4
    TOO_BIG = -5
    NO_SPACE = -6
    INVALID_REQUEST = -8
    TOO_MANY_OPEN = -9
    BUSY = -10
    TRY_AGAIN = -11
    BAD_FD = -12
    IS_DIR = -13
    NOT_DIR = -14
    NOT_EMPTY = -15
    UNKNOWN = -127


_ERRNO = {
    "EPERM": Status.NOT_AUTHORIZED, "EACCES": Status.NOT_AUTHORIZED, "ELOOP": Status.NOT_AUTHORIZED,
    "ENOENT": Status.DOESNT_EXIST, "EEXIST": Status.ALREADY_EXISTS, "EFBIG": Status.TOO_BIG,
    "ENOSPC": Status.NO_SPACE, "EBADF": Status.BAD_FD, "EINVAL": Status.INVALID_REQUEST,
    "E2BIG": Status.INVALID_REQUEST, "EMFILE": Status.TOO_MANY_OPEN, "ENFILE": Status.TOO_MANY_OPEN,
    "EBUSY": Status.BUSY, "EAGAIN": Status.TRY_AGAIN, "EINTR": Status.TRY_AGAIN, "EISDIR": Status.IS_DIR,
    "ENOTDIR": Status.NOT_DIR, "ENOTEMPTY": Status.NOT_EMPTY,
}

#: attributes a job may not set on itself: HTCondor's SYSTEM_IMMUTABLE_JOB_ATTRS, and the state the schedd keeps
PROTECTED = frozenset(name.lower() for name in (
    "Owner", "ClusterId", "ProcId", "JobUniverse", "MyType", "TargetType", "User", "OsUser",
    "JobStatus", "LastJobStatus", "EnteredCurrentStatus", "HoldReason", "HoldReasonCode", "HoldReasonSubCode",
    "NumJobStarts", "NumJobCompletions", "NumSystemHolds", "JobStartDate", "JobCurrentStartDate", "CompletionDate",
    "ExitCode", "ExitStatus", "ExitBySignal", "ExitSignal", "RemoteHost", "GlobalJobId", "QDate"))


class ChirpError(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def errno_status(error: OSError) -> int:
    import errno as errnos

    return _ERRNO.get(errnos.errorcode.get(error.errno or 0, ""), Status.UNKNOWN)


class ChirpJobs(Protocol):
    """The job a server belongs to, in the queue (each call runs on the backend's thread)."""

    def get_attribute(self, key: JobKey, name: str) -> str | None: ...

    def set_attributes(self, key: JobKey, values: dict[str, classad2.ExprTree]) -> None: ...

    def log_generic(self, key: JobKey, text: str) -> None: ...


class QueueJobs:
    """:class:`ChirpJobs` over the local backend's queue: the same writes a client's setAttribute makes."""

    def __init__(self, queue: Any) -> None:
        self._queue = queue

    def get_attribute(self, key: JobKey, name: str) -> str | None:
        ad = self._queue.get_job(*key)
        if ad is None:
            return None
        expression = ad.lookup(name) if name in ad else None
        return "UNDEFINED" if expression is None else str(expression)

    def set_attributes(self, key: JobKey, values: dict[str, classad2.ExprTree]) -> None:
        from backends.interface import AttributeChange, Batch, UnknownJob

        try:
            self._queue.commit(Batch(changes=[AttributeChange(*key, name, value) for name, value in values.items()]))
        except UnknownJob:
            pass  # the job left the queue meanwhile: nothing to change

    def log_generic(self, key: JobKey, text: str) -> None:
        from .lifecycle import Transition

        ad = self._queue.get_job(*key)
        if ad is not None:
            self._queue.write_transitions({key: (ad, Transition({}, [lambda user_log: user_log.generic(text)]))})


@dataclass
class NodeServer:
    """One node's server: its port, cookie, scratch directory and the delayed updates it keeps."""

    key: JobKey
    node: int
    scratch: Path
    plan: ChirpPlan
    cookie: str = field(default_factory=lambda: "".join(secrets.choice("abcdefghijklmnopqrstuvwxyz")
                                                        for _ in range(COOKIE_LENGTH)))
    delayed: dict[str, classad2.ExprTree] = field(default_factory=dict)
    port: Any = None
    connections: set = field(default_factory=set)


class ChirpService:
    """The chirp servers of the running jobs, in the reactor; the executor opens them before it starts a run and
    closes them when the run has ended."""

    def __init__(self, reactor: Any, call: Callable[..., Deferred], jobs: ChirpJobs) -> None:
        self._reactor = reactor
        self._call = call
        self._jobs = jobs
        self._servers: dict[JobKey, list[NodeServer]] = {}

    def open(self, key: JobKey, plan: ChirpPlan) -> None:
        """Listen for each node and write its ``.chirp.config`` (before the run starts: the job finds it there).
        A server that cannot be set up is logged; the job runs without it, as a starter's would."""
        servers = []
        for node, scratch in enumerate(plan.scratch):
            server = NodeServer(key, node, scratch, plan)
            try:
                server.port = self._reactor.listenTCP(0, _Factory(self, server), interface="127.0.0.1")
                _write_config(server)
            except Exception as exc:
                log.warn("no chirp server for node {node} of job {job}: {error}", node=node, job=key, error=exc)
                if server.port is not None:
                    server.port.stopListening()
                continue
            servers.append(server)
        self._servers[key] = servers

    def close(self, key: JobKey) -> Deferred | None:
        """Stop a run's servers and write its delayed updates to the job (on the backend's thread, so before
        anything the executor asks for the job after this)."""
        servers = self._servers.pop(key, [])
        pending: dict[str, classad2.ExprTree] = {}
        for server in servers:
            server.port.stopListening()
            for connection in list(server.connections):
                connection.transport.loseConnection()
            pending |= server.delayed
        if not pending:
            return None
        written = self._call(self._jobs.set_attributes, key, pending)
        written.addErrback(lambda failure: log.failure("writing the delayed chirp updates of job {job} failed",
                                                       failure, job=key))
        return written

    # -- what the connections ask for --------------------------------------------------------------------
    def queue(self, function: Callable[..., Any], *args: Any) -> Deferred:
        return self._call(function, *args)

    @property
    def jobs(self) -> ChirpJobs:
        return self._jobs

    @property
    def reactor(self) -> Any:
        return self._reactor


def _write_config(server: NodeServer) -> None:
    """``.chirp.config`` in the node's scratch directory, created by its owner, for its owner alone."""
    line = f"127.0.0.1 {server.port.getHost().port} {server.cookie}\n".encode()
    account = to_switch(server.plan.account)
    fd = open_as(account, str(server.scratch / CONFIG_NAME),
                 os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


class _Factory(protocol.Factory):
    noisy = False  # (a server per run: the gateway's log says when runs start and end)

    def __init__(self, service: ChirpService, server: NodeServer) -> None:
        self.service = service
        self.server = server

    def buildProtocol(self, addr: Any) -> "ChirpConnection":
        connection = ChirpConnection(self.service, self.server)
        connection.factory = self
        return connection


def words(line: str) -> list[str]:
    """A request's words: separated by blanks, a backslash escaping the next character (``sscanf_chirp``)."""
    found: list[str] = []
    current: list[str] | None = None
    characters = iter(line)
    for character in characters:
        if character in " \t":
            if current is not None:
                found.append("".join(current))
                current = None
            continue
        if character == "\\":
            character = next(characters, "")
        current = (current or []) + [character]
    if current is not None:
        found.append("".join(current))
    return found


class ChirpConnection(protocol.Protocol):
    """One client: the cookie first, then one request at a time."""

    def __init__(self, service: ChirpService, server: NodeServer) -> None:
        self.service = service
        self.server = server
        self.authenticated = False
        self._buffer = b""
        self._busy = False
        self._raw: tuple[int, Callable[[bytes], None], Deferred] | None = None  # data still to come, where it goes
        self._pumping = False
        self._files: dict[int, int] = {}  # chirp descriptor -> our descriptor
        self._next_fd = 3

    # -- transport ----------------------------------------------------------------------------------------
    def connectionMade(self) -> None:
        self.server.connections.add(self)

    def connectionLost(self, reason: Any = None) -> None:
        self.server.connections.discard(self)
        for fd in self._files.values():
            os.close(fd)
        self._files.clear()

    def dataReceived(self, data: bytes) -> None:
        self._buffer += data
        if len(self._buffer) > 4 * LINE_MAX + READ_MAX:
            self.transport.pauseProducing()  # a client that sends faster than we answer waits
        self._pump()

    def _pump(self) -> None:
        """Go on while there is something to do: data a request waits for, or the next request line."""
        if self._pumping:  # (a request that ended while we pumped: the loop below goes on)
            return
        self._pumping = True
        try:
            while self.transport is not None and not self.transport.disconnecting:
                if self._raw is not None:
                    if not self._take_raw():
                        break
                    continue
                if self._busy or not self._request_line():
                    break
        finally:
            self._pumping = False
        if self.transport is not None and len(self._buffer) <= LINE_MAX:
            self.transport.resumeProducing()

    def _request_line(self) -> bool:
        """Start the next request if its line has come; False when there is none yet."""
        end = self._buffer.find(b"\n")
        if end < 0 or end > LINE_MAX:
            if end > LINE_MAX or len(self._buffer) > LINE_MAX:  # as the starter: TOO_BIG, and the connection ends
                self._answer(Status.TOO_BIG)
                self.transport.loseConnection()
            return False
        line, self._buffer = self._buffer[:end], self._buffer[end + 1:]
        self._busy = True
        done = ensureDeferred(self._request(line.decode("utf-8", "replace").rstrip("\r")))
        done.addErrback(self._failed)
        done.addBoth(self._next)
        return True

    def _take_raw(self) -> bool:
        """Hand the bytes a request announced to its sink as they come; True once all have come (the request then
        goes on)."""
        assert self._raw is not None
        left, sink, arrived = self._raw
        chunk, self._buffer = self._buffer[:left], self._buffer[left:]
        if chunk:
            sink(chunk)
        left -= len(chunk)
        if left > 0:
            self._raw = (left, sink, arrived)
            return False
        self._raw = None
        arrived.callback(None)
        return True

    def _receive(self, length: int, sink: Callable[[bytes], None]) -> Deferred:
        """The ``length`` bytes of data that follow the request line, each chunk given to ``sink`` as it comes."""
        arrived: Deferred = Deferred()
        self._raw = (length, sink, arrived)
        self._pump()
        return arrived

    def _next(self, _: Any) -> None:
        self._busy = False
        self._pump()

    def _failed(self, failure: Any) -> None:
        if failure.check(ChirpError):
            self._answer(failure.value.status)
        elif failure.check(OSError):
            self._answer(errno_status(failure.value))
        else:
            log.failure("chirp request of job {job} failed", failure, job=self.server.key)
            self._answer(Status.UNKNOWN)

    def _answer(self, status: int, data: bytes = b"") -> None:
        if self.transport is not None:
            self.transport.write(b"%d\n" % status + data)

    # -- requests -----------------------------------------------------------------------------------------
    async def _request(self, line: str) -> None:
        request = words(line)
        if not request:
            raise ChirpError(Status.INVALID_REQUEST)
        if not self.authenticated:
            await self._authenticate(request)
            return
        command, arguments = request[0], request[1:]
        handler = _HANDLERS.get(command)
        if handler is None:
            raise ChirpError(Status.INVALID_REQUEST)
        enabled, arity, work = handler
        if not enabled(self.server.plan) or len(arguments) != arity:
            raise ChirpError(Status.INVALID_REQUEST)
        await work(self, *arguments)

    async def _authenticate(self, request: list[str]) -> None:
        if request[0] == "cookie" and len(request) == 2 and hmac.compare_digest(request[1].encode(),
                                                                                 self.server.cookie.encode()):
            self.authenticated = True
            self._answer(0)
            return
        if request[0] == "cookie":
            log.warn("a chirp client of job {job} presented a wrong cookie", job=self.server.key)
            await task.deferLater(self.service.reactor, WRONG_COOKIE_DELAY, lambda: None)
        self._answer(Status.NOT_AUTHENTICATED)

    # -- the job ad ---------------------------------------------------------------------------------------
    async def get_job_attr(self, name: str) -> None:
        value = await self.service.queue(self.service.jobs.get_attribute, self.server.key, name)
        if value is None:
            raise ChirpError(Status.DOESNT_EXIST)
        self._send(value.encode())

    async def set_job_attr(self, name: str, text: str) -> None:
        await self.service.queue(self.service.jobs.set_attributes, self.server.key, {name: _settable(name, text)})
        self._answer(0)

    async def set_job_attr_delayed(self, name: str, text: str) -> None:
        if len(text) > DELAYED_EXPRESSION_MAX or not fnmatch.fnmatchcase(name.lower(), DELAYED_PREFIX.lower()):
            raise ChirpError(Status.NOT_AUTHORIZED)
        expression = _settable(name, text)
        if name not in self.server.delayed and len(self.server.delayed) >= DELAYED_MAX:
            raise ChirpError(Status.TOO_MANY_OPEN)
        self.server.delayed[name] = expression
        self._answer(0)

    async def get_job_attr_delayed(self, name: str) -> None:
        if name in self.server.delayed:
            self._send(str(self.server.delayed[name]).encode())
            return
        value = await self.service.queue(self.service.jobs.get_attribute, self.server.key, name)
        if value is None or value == "UNDEFINED":
            raise ChirpError(Status.DOESNT_EXIST)
        self._send(value.encode())

    async def ulog(self, text: str) -> None:
        await self.service.queue(self.service.jobs.log_generic, self.server.key, text)
        self._answer(0)

    async def version(self) -> None:
        self._answer(VERSION)

    # -- files ----------------------------------------------------------------------------------------------
    def _root(self) -> str:
        return str(self.server.scratch)

    async def _as_owner(self, operation: str, *arguments: Any) -> Any:
        return await threads.deferToThreadPool(
            self.service.reactor, self.service.reactor.getThreadPool(), call_as, self.server.plan.account,
            chirpfiles.run, operation, self._root(), *arguments)

    async def _open_fd(self, name: str, flags: int, mode: int) -> int:
        def opener(path: Any, flags: int, mode: int) -> int:
            return chirpfiles.open_confined(self._root(), str(path), flags, mode)

        return await threads.deferToThreadPool(self.service.reactor, self.service.reactor.getThreadPool(), open_as,
                                               self.server.plan.account, name, flags, mode, opener)

    def _fd(self, text: str) -> int:
        try:
            return self._files[int(text)]
        except (KeyError, ValueError):
            raise ChirpError(Status.BAD_FD) from None

    async def open(self, name: str, flags: str, mode: str) -> None:
        if len(self._files) >= OPEN_MAX:
            raise ChirpError(Status.TOO_MANY_OPEN)
        fd = await self._open_fd(name, _open_flags(flags), _number(mode))
        chirp_fd, self._next_fd = self._next_fd, self._next_fd + 1
        self._files[chirp_fd] = fd
        self._answer(chirp_fd, (chirpfiles.stat_line(os.fstat(fd)) + "\n").encode())

    async def close(self, fd: str) -> None:
        os.close(self._fd(fd))
        del self._files[int(fd)]
        self._answer(0)

    async def read(self, fd: str, length: str) -> None:
        data = os.read(self._fd(fd), min(_number(length), READ_MAX))
        self._answer(len(data), data)

    async def pread(self, fd: str, length: str, offset: str) -> None:
        data = os.pread(self._fd(fd), min(_number(length), READ_MAX), _number(offset))
        self._answer(len(data), data)

    async def write(self, fd: str, length: str) -> None:
        await self._write_from_client(fd, _number(length), None)

    async def pwrite(self, fd: str, length: str, offset: str) -> None:
        await self._write_from_client(fd, _number(length), _number(offset))

    async def _write_from_client(self, fd_text: str, length: int, offset: int | None) -> None:
        """Take the ``length`` bytes that follow and write them (all are read, even when the descriptor is bad)."""
        fd = self._files.get(int(fd_text)) if fd_text.lstrip("-").isdigit() else None
        failure: list[OSError] = []
        position = [offset]

        def sink(chunk: bytes) -> None:
            if fd is None or failure:
                return
            try:
                if position[0] is None:
                    write_all(fd, chunk)
                else:
                    write_all(fd, chunk, position[0])
                    position[0] += len(chunk)
            except OSError as exc:
                failure.append(exc)

        await self._receive(length, sink)
        if fd is None:
            raise ChirpError(Status.BAD_FD)
        if failure:
            raise failure[0]
        self._answer(length)

    async def fsync(self, fd: str) -> None:
        os.fsync(self._fd(fd))
        self._answer(0)

    async def lseek(self, fd: str, offset: str, whence: str) -> None:
        if whence not in ("0", "1", "2"):
            raise ChirpError(Status.INVALID_REQUEST)
        self._answer(os.lseek(self._fd(fd), _number(offset), int(whence)))

    async def fstat(self, fd: str) -> None:
        self._answer(0, (chirpfiles.stat_line(os.fstat(self._fd(fd))) + "\n").encode())

    async def ftruncate(self, fd: str, length: str) -> None:
        os.ftruncate(self._fd(fd), _number(length))
        self._answer(0)

    async def getfile(self, name: str) -> None:
        fd = await self._open_fd(name, os.O_RDONLY, 0)
        try:
            size = os.fstat(fd).st_size
            self.transport.write(b"%d\n" % size)
            sent = 0
            while sent < size:
                chunk = os.pread(fd, min(READ_MAX, size - sent), sent)
                if not chunk:  # it shrank meanwhile: the count was promised, so pad it
                    chunk = b"\0" * (size - sent)
                self.transport.write(chunk)
                sent += len(chunk)
        finally:
            os.close(fd)

    async def putfile(self, name: str, mode: str, length: str) -> None:
        size = _number(length)
        fd = await self._open_fd(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, _number(mode))
        try:
            self._answer(0)  # the client sends the data only after this
            failure: list[OSError] = []

            def sink(chunk: bytes) -> None:
                if not failure:
                    try:
                        write_all(fd, chunk)
                    except OSError as exc:
                        failure.append(exc)

            await self._receive(size, sink)
            if failure:
                raise failure[0]
            self._answer(size)
        finally:
            os.close(fd)

    async def _simple(self, operation: str, *arguments: Any) -> None:
        await self._as_owner(operation, *arguments)
        self._answer(0)

    async def unlink(self, name: str) -> None:
        await self._simple("unlink", name)

    async def rename(self, old: str, new: str) -> None:
        await self._simple("rename", old, new)

    async def mkdir(self, name: str, mode: str) -> None:
        await self._simple("mkdir", name, _number(mode))

    async def rmdir(self, name: str) -> None:
        await self._simple("rmdir", name)

    async def rmall(self, name: str) -> None:
        await self._simple("rmall", name)

    async def chmod(self, name: str, mode: str) -> None:
        await self._simple("chmod", name, _number(mode))

    async def truncate(self, name: str, length: str) -> None:
        await self._simple("truncate", name, _number(length))

    async def utime(self, name: str, accessed: str, modified: str) -> None:
        await self._simple("utime", name, _number(accessed), _number(modified))

    async def access(self, name: str, mode: str) -> None:
        await self._simple("access", name, _number(mode))

    async def stat(self, name: str) -> None:
        self._answer(0, ((await self._as_owner("stat", name)) + "\n").encode())

    async def statfs(self, name: str) -> None:
        self._answer(0, ((await self._as_owner("statfs", name)) + "\n").encode())

    async def getdir(self, name: str) -> None:
        self._send((await self._as_owner("getdir", name, False)).encode())

    async def getlongdir(self, name: str) -> None:
        self._send((await self._as_owner("getdir", name, True)).encode())

    async def readlink(self, name: str, length: str) -> None:
        target = (await self._as_owner("readlink", name)).encode()[:_number(length)]
        self._send(target)

    async def whoami(self, length: str) -> None:
        account = self.server.plan.account
        name = account.name if account is not None else _gateway_user()
        self._send(name.encode()[:_number(length)])

    async def refused(self, *_: str) -> None:
        """Links and ownership: a job may not make links that other programs would follow, nor give files away."""
        raise ChirpError(Status.NOT_AUTHORIZED)

    def _send(self, data: bytes) -> None:
        self._answer(len(data), data)


def _settable(name: str, text: str) -> classad2.ExprTree:
    """The expression a job sets ``name`` to; NOT_AUTHORIZED for the schedd's own attributes, INVALID_REQUEST for
    text that is no expression."""
    if not name or not name.replace("_", "a").isalnum() or name[0].isdigit():
        raise ChirpError(Status.INVALID_REQUEST)
    if name.lower() in PROTECTED:
        raise ChirpError(Status.NOT_AUTHORIZED)
    try:
        return classad2.ExprTree(text)
    except (classad2.ClassAdException, ValueError, TypeError):
        raise ChirpError(Status.INVALID_REQUEST) from None


def _open_flags(text: str) -> int:
    if not text or set(text) - set("rwatcx"):
        raise ChirpError(Status.INVALID_REQUEST)
    flags = (os.O_RDWR if "r" in text else os.O_WRONLY) if "w" in text else os.O_RDONLY
    for letter, flag in (("c", os.O_CREAT), ("t", os.O_TRUNC), ("x", os.O_EXCL), ("a", os.O_APPEND)):
        if letter in text:
            flags |= flag
    return flags


def _number(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ChirpError(Status.INVALID_REQUEST) from None
    if value < 0:
        raise ChirpError(Status.INVALID_REQUEST)
    return value


def _gateway_user() -> str:
    import pwd

    return pwd.getpwuid(os.geteuid()).pw_name


def _on(flag: str) -> Callable[[ChirpPlan], bool]:
    return lambda plan: bool(getattr(plan, flag))


_Handler = tuple[Callable[[ChirpPlan], bool], int, Callable[..., Awaitable[None]]]
#: command -> (whether the run allows it, how many arguments, what does it)
_HANDLERS: dict[str, _Handler] = {
    "version": (lambda plan: True, 0, ChirpConnection.version),
    "get_job_attr": (_on("updates"), 1, ChirpConnection.get_job_attr),
    "set_job_attr": (_on("updates"), 2, ChirpConnection.set_job_attr),
    "ulog": (_on("updates"), 1, ChirpConnection.ulog),
    "get_job_attr_delayed": (_on("delayed"), 1, ChirpConnection.get_job_attr_delayed),
    "set_job_attr_delayed": (_on("delayed"), 2, ChirpConnection.set_job_attr_delayed),
    **{name: (_on("files"), arity, getattr(ChirpConnection, name)) for name, arity in (
        ("open", 3), ("close", 1), ("read", 2), ("pread", 3), ("write", 2), ("pwrite", 3), ("fsync", 1),
        ("lseek", 3), ("fstat", 1), ("ftruncate", 2), ("getfile", 1), ("putfile", 3), ("unlink", 1),
        ("rename", 2), ("mkdir", 2), ("rmdir", 1), ("rmall", 1), ("chmod", 2), ("truncate", 2), ("utime", 3),
        ("access", 2), ("stat", 1), ("statfs", 1), ("getdir", 1), ("getlongdir", 1),
        ("readlink", 2), ("whoami", 1))},
    **{name: (_on("files"), arity, ChirpConnection.refused) for name, arity in (
        ("link", 2), ("symlink", 2), ("chown", 3), ("lchown", 3), ("fchown", 3))},
}
_HANDLERS["lstat"] = (_on("files"), 1, ChirpConnection.stat)

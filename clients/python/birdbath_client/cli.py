"""``birdbath``: HTCondor-style commands against a Birdbath gateway.

    birdbath [-url URL] submit FILE.sub [-spool]        submit a submit description (condor_submit)
    birdbath q [-nobatch] [-hold | -run] [-constraint EXPR] [-long | -af ATTR...] [CLUSTER | CLUSTER.PROC | OWNER]...
                                                        list queued jobs (condor_q)
    birdbath history [-limit N] [-constraint EXPR] [-long | -af ATTR...] [CLUSTER | CLUSTER.PROC | OWNER]...
                                                        jobs that left the queue, newest first (condor_history)
    birdbath rm|hold|release CLUSTER.PROC|CLUSTER|OWNER... [-reason TEXT]
    birdbath rm|hold|release -all [-reason TEXT]        act on jobs (condor_rm, condor_hold, condor_release)
    birdbath wait ID [-timeout S]                       wait for a job (progress on stderr)
    birdbath fetch ID [DIR] [-close]                    download a job's spool (output) files
    birdbath submit_dag FILE.dag [-owner NAME] [-wait]  submit a DAG (condor_submit_dag)
    birdbath status [-schedd | -submitters | -master | -any] [-constraint EXPR] [-long | -af ATTR...]
                                                        the pool's machines, schedulers, ... (condor_status)
    birdbath version

A number is a cluster (all its jobs), CLUSTER.PROC one job, anything else an owner's jobs.  Every option may be
spelled with one dash or two (-long, --long).  The gateway URL comes from -url, else BIRDBATH_URL, else the
local socket of the gateway on this machine (one's own gateway's, else /var/lib/birdbath-gateway/birdbath.sock),
where the kernel tells the gateway who you are, else http://127.0.0.1:1984/.  For an https URL, BIRDBATH_CA names the CA file that signed the gateway's certificate,
BIRDBATH_CERT (and BIRDBATH_KEY) a client certificate, or BIRDBATH_USER and BIRDBATH_PASSWORD a password login.

Exit status: 0 on success, 1 on an error (a message on stderr), 2 on a usage error.  wait (and submit_dag -wait)
exits with the job's exit code, 128 + N if a signal N killed it, 1 if it was removed.  When the reader of the
output goes away (birdbath q -long | head -1) the command stops quietly with 141 (128 + SIGPIPE), the status a
shell reports for a C tool killed by SIGPIPE.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence, TextIO

from . import status_tables, tables
from .collector import Collector
from .credentials import Credentials
from .errors import GatewayError, UnknownJob
from .jobs import FINAL_STATES, JOB_STATES, JobId, JobStatus, Scope, Selection, all_of, any_of
from .schedd import Progress, Schedd

SELECTION = "CLUSTER|CLUSTER.PROC|OWNER"
SPINNER = "|/-\\"


@dataclass(frozen=True)
class Action:
    """rm, hold or release: the Schedd method, condor_rm's word for it, and the states of the jobs a cluster,
    owner or -all selection applies it to (as condor_hold skips held jobs, and condor_release acts on held ones)."""

    verb: str
    done: str
    acts_on: frozenset[JobStatus]


ACTIONS = {
    "rm": Action("remove", "marked for removal", frozenset(JobStatus) - FINAL_STATES),
    "hold": Action("hold", "held", frozenset(JobStatus) - FINAL_STATES - {JobStatus.HELD}),
    "release": Action("release", "released", frozenset({JobStatus.HELD})),
}

#: q's views: -hold and -run show what condor_q -hold and -run show, of the jobs in that state
VIEWS = {"hold": (tables.HELD, JobStatus.HELD), "run": (tables.RUNNING, JobStatus.RUNNING)}


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        status = _run(args)
        sys.stdout.flush()  # here rather than at exit, where a reader that went away could not be handled
        return status
    except BrokenPipeError:
        return _reader_gone()
    except KeyboardInterrupt:
        return 128 + signal.SIGINT


def _run(args: argparse.Namespace) -> int:
    try:
        return args.run(args.client(args.url, credentials=Credentials.from_environment()), args) or 0
    except BrokenPipeError:
        raise
    except (GatewayError, OSError, ValueError) as exc:  # OSError: GatewayUnavailable, TimeoutError, local files
        print(f"birdbath: {exc}", file=sys.stderr)
        return 1


def _reader_gone() -> int:
    """The reader of our output went away (``birdbath q | head -1``).  Python ignores SIGPIPE and raises
    BrokenPipeError instead; stop quietly with the status of a tool SIGPIPE killed.  stdout and stderr now go to
    /dev/null, so the interpreter's last flush of what is still buffered cannot fail again at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        try:
            os.dup2(devnull, stream.fileno())
        except (OSError, ValueError):  # a stream without a file descriptor (replaced by a caller)
            pass
    return 128 + signal.SIGPIPE


# -- arguments -----------------------------------------------------------------------------------------
def _option(parser: argparse.ArgumentParser | Any, *names: str, **kwargs: Any) -> None:
    """An option under both spellings users type: condor_q's ``-long`` and the GNU ``--long``."""
    parser.add_argument(*(dash + name for name in names for dash in ("-", "--")), **kwargs)


def _selection(text: str) -> Selection:
    try:
        return Selection.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _job_id(text: str) -> JobId:
    selection = _selection(text)
    if selection.scope not in (Scope.JOB, Scope.CLUSTER):
        raise argparse.ArgumentTypeError(f"{text!r} is not a job id (CLUSTER.PROC)")
    return selection.job


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="birdbath", description="HTCondor-style commands for a Birdbath gateway",
                                     epilog="\n\n".join(__doc__.split("\n\n")[2:]), allow_abbrev=False,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    _option(parser, "url", default=os.environ.get("BIRDBATH_URL") or None,
            help="the gateway (default: $BIRDBATH_URL, else the local socket of the gateway on this machine, else "
                 "http://127.0.0.1:1984/); unix:PATH: a local socket; behind condor_shared_port: "
                 "<host:9618?sock=ID> or http://host:9618/?sock=ID")
    commands = parser.add_subparsers(required=True, metavar="COMMAND")

    def command(name: str, run: Callable[[Any, argparse.Namespace], int | None], help: str,
                **defaults: Any) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help, description=help, allow_abbrev=False)
        sub.set_defaults(run=run, parser=sub, **{"client": Schedd, **defaults})
        return sub

    submit = command("submit", _submit, "submit a submit description file (condor_submit)")
    submit.add_argument("file", type=Path)
    _option(submit, "spool", action="store_true",
            help="send the executable and input files to the gateway instead of sharing a file system")

    q = command("q", _q, "list queued jobs (condor_q)")
    _selections(q)
    _option(q, "nobatch", action="store_true", help="one line per job (accepted: the table is per job already)")
    view = q.add_mutually_exclusive_group()
    _option(view, "hold", dest="view", action="store_const", const="hold", help="held jobs, with their HoldReason")
    _option(view, "run", dest="view", action="store_const", const="run", help="running jobs, with their host")
    _formats(q)

    history = command("history", _history, "jobs that left the queue, newest first (condor_history)")
    _selections(history)
    _option(history, "limit", type=int, metavar="N", help="at most N jobs")
    _formats(history)

    for name, action in ACTIONS.items():
        act = command(name, _act, f"{action.verb} jobs (condor_{name}): CLUSTER.PROC one job, CLUSTER all of "
                                  f"its jobs, OWNER all of an owner's jobs", action=action)
        act.add_argument("selections", nargs="*", type=_selection, metavar=SELECTION)
        _option(act, "all", action="store_true", help=f"{action.verb} every job")
        _option(act, "reason", metavar="TEXT")

    wait = command("wait", _wait, "wait for a job to finish; the exit status is the job's exit code")
    wait.add_argument("job", type=_job_id, metavar="ID")
    _option(wait, "timeout", type=float, metavar="S", help="give up (status 1) after S seconds")

    fetch = command("fetch", _fetch, "download a job's spool files (its output)")
    fetch.add_argument("job", type=_job_id, metavar="ID")
    fetch.add_argument("directory", type=Path, nargs="?", default=Path("."), metavar="DIR")
    _option(fetch, "close", action="store_true", help="close the spool afterwards (the job may leave the queue)")

    dag = command("submit_dag", _submit_dag, "submit a DAG (condor_submit_dag)")
    dag.add_argument("file", type=Path)
    _option(dag, "owner", metavar="NAME")
    _option(dag, "wait", action="store_true", help="wait for the DAG and exit with its status")

    status = command("status", _status, "the pool's machines, or its schedulers, submitters, ... (condor_status)",
                     client=Collector)
    kind = status.add_mutually_exclusive_group()
    for name, kind_name, what in (("schedd", "schedd", "schedulers"), ("submitters", "submitter", "submitters"),
                                  ("master", "master", "masters"), ("any", "any", "every ad")):
        _option(kind, name, dest="kind", action="store_const", const=kind_name, help=what)
    _option(status, "constraint", metavar="EXPR", help="only ads for which this ClassAd expression is true")
    _formats(status)

    command("version", lambda schedd, args: print(schedd.version(), schedd.platform(), sep="\n"),
            "the gateway's version and platform")
    return parser


def _selections(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("selections", nargs="*", type=_selection, metavar=SELECTION,
                        help="only these jobs: a cluster, one job, or an owner's")
    _option(parser, "constraint", metavar="EXPR", help="only jobs for which this ClassAd expression is true")


def _formats(parser: argparse.ArgumentParser) -> None:
    form = parser.add_mutually_exclusive_group()
    _option(form, "long", action="store_true", help="whole job ads")
    _option(form, "af", "autoformat", dest="autoformat", nargs="+", metavar="ATTR",
            help="these attributes' values, one line per job")


# -- commands ------------------------------------------------------------------------------------------
def _submit(schedd: Schedd, args: argparse.Namespace) -> int:
    from .submitfile import job_ads

    ads = job_ads(args.file)
    files: dict[str, Path] = {}
    if args.spool:
        first = ads[0]
        names = [name.strip() for name in str(first.get("TransferInput", "")).split(",") if name.strip()]
        iwd = Path(str(first.get("Iwd", args.file.parent)))
        files = {Path(name).name: iwd / name for name in names}
        files[Path(str(first["Cmd"])).name] = Path(str(first["Cmd"]))
        for ad in ads:
            ad.pop("Iwd", None)  # the spool becomes Iwd
            ad["Cmd"] = Path(str(first["Cmd"])).name
            ad["TransferInput"] = ",".join(files)
            ad["ShouldTransferFiles"] = "YES"
            ad["LeaveJobInQueue"] = _keep()  # as condor_submit -spool: stay until the output is fetched
            ad["FilesRetrieved"] = False
    with ProgressLine() as line:
        jobs = schedd.submit_many(ads, files, progress=_bytes_progress(line, "uploading") if files else None)
    print(f"{len(jobs)} job(s) submitted to cluster {jobs[0].cluster}.")
    return 0


def _keep() -> Any:
    from .ads import Expr

    return Expr("FilesRetrieved =?= false")


#: condor_status's table for each kind it prints as one (the others print -long)
STATUS_TABLES = {"startd": status_tables.MACHINES, "schedd": status_tables.SCHEDDS,
                 "submitter": status_tables.SUBMITTERS}


def _status(collector: Collector, args: argparse.Namespace) -> int:
    kind = args.kind or "startd"
    ads = sorted(collector.query(kind, args.constraint), key=lambda ad: str(ad.get("Name", "")))
    columns = STATUS_TABLES.get(kind)
    if args.long or args.autoformat or columns is None:
        args.long = args.long or not args.autoformat
        _show(ads, args, ())
        return 0
    for line in status_tables.table(columns, ads):
        print(line)
    if kind == "startd" and ads:
        print()
        for line in status_tables.machine_totals(ads):
            print(line)
    return 0


def _q(schedd: Schedd, args: argparse.Namespace) -> int:
    columns, status = VIEWS.get(args.view, (tables.QUEUE, None))
    constraint = all_of(any_of(args.selections), args.constraint, status and f"JobStatus == {int(status)}")
    ads = sorted(schedd.query(constraint), key=lambda ad: (ad.get("ClusterId", 0), ad.get("ProcId", 0)))
    _show(ads, args, columns)
    if not (args.long or args.autoformat):
        print("\n" + tables.totals(ads))
    return 0


def _history(schedd: Schedd, args: argparse.Namespace) -> int:
    _show(schedd.history(all_of(any_of(args.selections), args.constraint), args.limit), args, tables.HISTORY)
    return 0


def _show(ads: list[dict[str, Any]], args: argparse.Namespace, columns: tuple[tables.Column, ...]) -> None:
    """The ads as -long, -af or the table the command shows by default."""
    if args.long:
        for ad in ads:
            print(tables.long_form(ad), end="\n\n")
    elif args.autoformat:
        for ad in ads:
            print(tables.autoformat(ad, args.autoformat))
    else:
        for line in tables.table(columns, ads):
            print(line)


def _act(schedd: Schedd, args: argparse.Namespace) -> int:
    if args.all == bool(args.selections):
        args.parser.error(f"give {SELECTION} arguments or -all (not both)")
    selections = [Selection.everything()] if args.all else args.selections
    failures = [selection for selection in selections if not _act_on(schedd, args.action, selection, args.reason)]
    return 1 if failures else 0


def _act_on(schedd: Schedd, action: Action, selection: Selection, reason: str | None) -> bool:
    """Apply the action to what one argument selects, print condor_rm's line for it; False if anything failed."""
    if selection.scope is Scope.JOB:
        return _act_on_job(schedd, action, selection.job, reason)
    found = schedd.query(selection.constraint())
    jobs = [JobId(ad["ClusterId"], ad["ProcId"]) for ad in found if JobStatus.of(ad) in action.acts_on]
    if not jobs:
        _error(f"no job {_group(selection)}to {action.verb}")
        return False
    if action.verb == "remove" and selection.scope is Scope.CLUSTER:  # Birdbath's own call for it
        ok = _attempt(str(selection), lambda: schedd.remove_cluster(selection.cluster, reason))
    else:
        ok = all([_apply(schedd, action, job, reason) for job in jobs])  # a list: act on every job
    if ok:
        print(f"All jobs {_group(selection)}have been {action.done}.")
    return ok


def _group(selection: Selection) -> str:
    """condor_rm's words for a group of jobs: "in cluster 27 ", 'of user "alice" ', or nothing for all."""
    if selection.scope is Scope.CLUSTER:
        return f"in {selection} "
    if selection.scope is Scope.OWNER:
        return f"of {selection} "
    return ""


def _act_on_job(schedd: Schedd, action: Action, job: JobId, reason: str | None) -> bool:
    if _apply(schedd, action, job, reason):
        print(f"Job {job} {action.done}.")
        return True
    return False


def _apply(schedd: Schedd, action: Action, job: JobId, reason: str | None) -> bool:
    return _attempt(f"job {job}", lambda: getattr(schedd, action.verb)(job, reason))


def _attempt(what: str, call: Callable[[], None]) -> bool:
    """A failed action is reported and does not stop the others (condor_rm goes on too)."""
    try:
        call()
        return True
    except GatewayError as exc:
        _error(f"{what}: {exc}")
        return False


def _wait(schedd: Schedd, args: argparse.Namespace) -> int:
    return _wait_for(schedd, args.job, args.timeout)


def _wait_for(schedd: Schedd, job: JobId, timeout: float | None) -> int:
    """Wait with a progress line; then the job's fate on stdout and its exit code as ours."""
    started = time.monotonic()

    def show(ad: dict[str, Any] | None) -> None:
        elapsed = time.monotonic() - started
        state = "unknown" if ad is None else JOB_STATES.get(ad.get("JobStatus"), "?")
        line.show(f"{SPINNER[int(elapsed * 4) % 4]} job {job}: {state:<20} {elapsed:6.1f} s")

    with ProgressLine() as line:
        final = schedd.wait(job, timeout=timeout, poll=0.25, progress=show)
    if final is None:
        raise UnknownJob.nowhere("wait", job)
    return _outcome(job, final)


def _outcome(job: JobId, final: dict[str, Any]) -> int:
    """A finished job's exit status as a shell sees a process's: its exit code, 128 + N for signal N; a removed
    job (or one without an exit code) is a failure, 1, with the reason on stderr."""
    if JobStatus.of(final) is JobStatus.REMOVED:
        print(f"job {job}: Removed")
        reason = final.get("RemoveReason")
        _error(f"job {job} was removed" + (f" ({reason})" if reason else ""))
        return 1
    if final.get("ExitBySignal") is True:
        number = int(final.get("ExitSignal") or 0)
        print(f"job {job}: Completed, killed by signal {number}")
        return 128 + number
    code = final.get("ExitCode")
    if not isinstance(code, int):
        print(f"job {job}: Completed")
        _error(f"job {job} completed without an exit code")
        return 1
    print(f"job {job}: Completed, exit code {code}")
    return code


def _fetch(schedd: Schedd, args: argparse.Namespace) -> int:
    with ProgressLine() as line:
        written = schedd.download(args.job, args.directory, progress=_bytes_progress(line, "downloading"))
    for path in written:
        print(path)
    if args.close:
        schedd.close_spool(args.job)
    return 0


def _submit_dag(schedd: Schedd, args: argparse.Namespace) -> int:
    job = schedd.submit_dag(args.file, owner=args.owner, keep=args.wait)
    print(f"DAG {args.file} submitted as job {job}.")
    if not args.wait:
        return 0
    status = _wait_for(schedd, job, None)
    schedd.close_spool(job)
    return status


# -- output --------------------------------------------------------------------------------------------
def _error(message: str) -> None:
    print(f"birdbath: {message}", file=sys.stderr)


class ProgressLine:
    """A status line on stderr, redrawn in place.  Leaving the ``with`` block ends it with a newline (also on an
    error) so that what follows, a result, an error or the shell's prompt, starts on a line of its own."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.width = 0  # of the longest text shown, to blank out what a shorter one would leave behind

    def show(self, text: str) -> None:
        print("\r" + text.ljust(self.width), end="", file=self.stream, flush=True)
        self.width = max(self.width, len(text))

    def __enter__(self) -> "ProgressLine":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if self.width:
            print(file=self.stream, flush=True)


def _bytes_progress(line: ProgressLine, verb: str, width: int = 30) -> Progress:
    def show(done: int, total: int) -> None:
        filled = width if total == 0 else int(width * done / total)
        line.show(f"{verb} [{'#' * filled}{'.' * (width - filled)}] {done}/{total} bytes")
    return show


if __name__ == "__main__":
    sys.exit(main())

"""``birdbath``: HTCondor-style commands against a Birdbath gateway.

    birdbath [-url URL] submit [VAR=VALUE...] FILE.sub [-spool] [-terse] [-a CMD]... [-batch-name NAME] [-dry-run F]
                                                        submit a submit description (condor_submit)
    birdbath q [-allusers] [-nobatch] [-totals] [-better-analyze] [-hold | -run] [-constraint EXPR]
               [-long | -af[:jhlnrt] ATTR... | -format FMT ATTR...] [CLUSTER | CLUSTER.PROC | OWNER]...
                                                        list queued jobs (condor_q; a line per batch unless -nobatch;
                                                        only those of the owner the gateway takes you for unless
                                                        -allusers or jobs are named)
    birdbath history [-limit N] [-constraint EXPR] [-long | -af ATTR...] [CLUSTER | CLUSTER.PROC | OWNER]...
                                                        jobs that left the queue, newest first (condor_history)
    birdbath rm|hold|release CLUSTER.PROC|CLUSTER|OWNER... [-reason TEXT]
    birdbath rm|hold|release -all|-constraint EXPR [-reason TEXT]
                                                        act on jobs (condor_rm, condor_hold, condor_release)
    birdbath qedit CLUSTER.PROC|CLUSTER|OWNER|-constraint EXPR ATTR VALUE...
                                                        set job attributes (condor_qedit)
    birdbath wait ID|CLUSTER [-timeout S]               wait for a job or a cluster (progress on stderr)
    birdbath fetch ID|CLUSTER [DIR] [-close]            download a job's (or a cluster's jobs') spool (output) files
    birdbath submit_dag FILE.dag [-owner NAME] [-wait]  submit a DAG (condor_submit_dag)
    birdbath status [-schedd | -submitters | -master | -any] [-constraint EXPR] [-long | -af ATTR...]
                                                        the pool's machines, schedulers, ... (condor_status)
    birdbath token create -identity USER@DOMAIN [-key KEYID] [-authz AUTHZ]... [-lifetime S] [-token NAME | -file F]
                                                        make an IDTOKEN with the gateway's key (condor_token_create;
                                                        on the gateway's host, with the gateway installed)
    birdbath version                                    the gateway's version (-version: this client's)

A number is a cluster (all its jobs), CLUSTER.PROC one job, anything else an owner's jobs.  Every option may be
spelled with one dash or two (-long, --long), -url before or after the command.  The gateway URL comes from -url, else BIRDBATH_URL, else the
local socket of the gateway on this machine (one's own gateway's, else /var/lib/birdbath-gateway/birdbath.sock),
where the kernel tells the gateway who you are, else http://127.0.0.1:1984/.  For an https URL, BIRDBATH_CA names the CA file that signed the gateway's certificate,
BIRDBATH_CERT (and BIRDBATH_KEY) a client certificate, or BIRDBATH_USER and BIRDBATH_PASSWORD a password login; a
bearer token is sent over https when one is found as HTCondor finds it (BEARER_TOKEN, BEARER_TOKEN_FILE, else
_CONDOR_SEC_TOKEN_DIRECTORY or ~/.condor/tokens.d).

Exit status: 0 on success, 1 on an error (one line on stderr, never a traceback), 2 on a usage error.  wait (and
submit_dag -wait) exits with the job's exit code, 128 + N if a signal N killed it, 1 if it was removed; for a
cluster, 0 if every job (queued or already in the history) exited 0, else the first other status.  When the reader of the
output goes away (birdbath q -long | head -1) the command stops quietly with 141 (128 + SIGPIPE), the status a
shell reports for a C tool killed by SIGPIPE.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import time
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Callable, Sequence, TextIO

from . import batches, status_tables, tables
from .ads import parse_constraint
from .collector import Collector
from .credentials import Credentials
from .errors import GatewayError, GatewayUnavailable, UnknownJob
from .jobs import FINAL_STATES, JOB_STATES, JobId, JobStatus, Scope, Selection, all_of, any_of
from .schedd import Progress, Schedd

SELECTION = "CLUSTER|CLUSTER.PROC|OWNER"
SPINNER = "|/-\\"
#: the entry point group of commands other distributions give ``birdbath`` (the gateway's ``token``)
COMMANDS = "birdbath.commands"


@dataclass(frozen=True)
class Action:
    """rm, hold or release: the Schedd method, condor_rm's word for it, and the states of the jobs a cluster,
    owner or -all selection applies it to (as condor_hold skips held jobs, and condor_release acts on held ones);
    ``clears``: whether it lets a job leave the queue instead (rm of a completed job kept for its output closes
    its spool, as ``fetch -close`` does)."""

    name: str
    verb: str
    done: str
    acts_on: frozenset[JobStatus]
    clears: Callable[[dict[str, Any]], bool] = lambda ad: False

    def default_reason(self, user: str) -> str:
        """The reason condor_rm gives when none is given, naming the tool and the user ("via condor_rm (by user
        alice)"): the owner the gateway takes the caller for."""
        return f"via birdbath {self.name} (by user {user})"

    def refusal(self, job: JobId, state: JobStatus | None) -> str:
        """Why a job in ``state`` is not acted on, as condor_hold and condor_release say it."""
        if state is None:
            return f"Job {job} not found."
        if self.verb == "hold" and state is JobStatus.HELD:
            return f"Job {job} is already held."
        if self.verb == "release":
            return f"Job {job} is not held."
        return f"Job {job} is already {state.label.lower()}."


def kept_for_output(ad: dict[str, Any]) -> bool:
    """A completed job that stays queued until its output is retrieved: one whose spool is still open
    (``FilesRetrieved`` false, as spooled submits, createJobTemplate's template and the submission API's staged jobs
    set it), not one with a plain ``LeaveJobInQueue = true``."""
    return JobStatus.of(ad) is JobStatus.COMPLETED and ad.get("FilesRetrieved") is False


ACTIONS = {
    "rm": Action("rm", "remove", "marked for removal", frozenset(JobStatus) - FINAL_STATES, kept_for_output),
    "hold": Action("hold", "hold", "held", frozenset(JobStatus) - FINAL_STATES - {JobStatus.HELD}),
    "release": Action("release", "release", "released", frozenset({JobStatus.HELD})),
}

#: q's views: -hold and -run show what condor_q -hold and -run show, of the jobs in that state
VIEWS = {"hold": (tables.HELD, JobStatus.HELD), "run": (tables.RUNNING, JobStatus.RUNNING)}


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(_split_af_options(sys.argv[1:] if argv is None else list(argv)))
    try:
        status = _run(args)
        sys.stdout.flush()  # here rather than at exit, where a reader that went away could not be handled
        return status
    except BrokenPipeError:
        return _reader_gone()
    except KeyboardInterrupt:
        return 128 + signal.SIGINT


def _split_af_options(argv: list[str]) -> list[str]:
    """condor_q's ``-af:jh ATTR...`` as ``-af ATTR... -af-options jh`` (argparse knows no option with a suffix)."""
    result, options = [], []
    for word in argv:
        name, colon, letters = word.partition(":")
        if colon and name.lstrip("-") in ("af", "autoformat") and name.startswith("-"):
            result.append(name)
            options.append(letters)
        else:
            result.append(word)
    if options:
        unknown = set("".join(options)) - set("jhlnrt")
        if unknown:
            print(f"birdbath: -af: unknown option letters {''.join(sorted(unknown))} (use j, h, l, n, r, t)",
                  file=sys.stderr)
            sys.exit(2)
        result += ["--af-options", "".join(options)]
    return result


def _run(args: argparse.Namespace) -> int:
    try:
        needs_gateway = not getattr(args, "dry_run", None)
        client = args.client(args.url, credentials=Credentials.from_environment()) if needs_gateway else None
        return args.run(client, args) or 0
    except BrokenPipeError:
        raise
    except (GatewayError, OSError, ValueError) as exc:  # OSError: GatewayUnavailable, TimeoutError, local files
        _error(str(exc) or type(exc).__name__)
        return 1
    except Exception as exc:  # what nobody foresaw: still one line, never a traceback
        if os.environ.get("BIRDBATH_DEBUG"):
            raise
        _error(f"ERROR: {type(exc).__name__}: {exc} (BIRDBATH_DEBUG=1 shows where)")
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


def _job_or_cluster(text: str) -> Selection:
    selection = _selection(text)
    if selection.scope not in (Scope.JOB, Scope.CLUSTER):
        raise argparse.ArgumentTypeError(f"{text!r} is neither a job id (CLUSTER.PROC) nor a cluster")
    return selection


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="birdbath", description="HTCondor-style commands for a Birdbath gateway",
                                     epilog="\n\n".join(__doc__.split("\n\n")[2:]), allow_abbrev=False,
                                     formatter_class=argparse.RawDescriptionHelpFormatter, add_help=False)
    _help(parser)
    _option(parser, "version", action="version", version=f"birdbath {_client_version()} (birdbath-client)",
            help="this client's version and exit ('birdbath version' asks the gateway for its own)")
    _url(parser, os.environ.get("BIRDBATH_URL") or None)
    commands = parser.add_subparsers(required=True, metavar="COMMAND")

    def command(name: str, run: Callable[[Any, argparse.Namespace], int | None], help: str,
                **defaults: Any) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help, description=help, allow_abbrev=False, add_help=False)
        _help(sub)
        _url(sub, argparse.SUPPRESS)  # after the command too (the one before it stands unless this is given)
        sub.set_defaults(run=run, parser=sub, **{"client": Schedd, **defaults})
        return sub

    submit = command("submit", _submit, "submit a submit description file (condor_submit)")
    submit.add_argument("words", nargs="+", metavar="[VAR=VALUE...] FILE",
                        help="the submit description file (condor_submit's language), after any VAR=VALUE: each "
                             "defined as if it were the file's first line")
    _option(submit, "a", "append", dest="append", action="append", default=[], metavar="COMMAND",
            help="a submit command as if it came just before the file's first queue statement (repeatable)")
    _option(submit, "batch-name", dest="batch_name", metavar="NAME",
            help="the jobs' batch name (JobBatchName), which q's line per batch shows")
    _option(submit, "dry-run", dest="dry_run", metavar="FILE",
            help="submit nothing: write the jobs' ads to FILE ('-': the standard output), as condor_submit -dry-run "
                 "(the clusters are numbered from 1; no gateway is needed)")
    _option(submit, "spool", action="store_true",
            help="send the executable and input files to the gateway instead of sharing a file system")
    _option(submit, "terse", action="store_true",
            help="print only each cluster's first and last job id (FIRST - LAST), as condor_submit -terse")

    q = command("q", _q, "list queued jobs (condor_q)")
    _selections(q)
    _option(q, "nobatch", action="store_true", help="one line per job instead of one per batch (cluster or DAG)")
    _option(q, "totals", action="store_true", help="only the totals line")
    _option(q, "allusers", action="store_true",
            help="every user's jobs (without it and without CLUSTER|CLUSTER.PROC|OWNER arguments, only yours, as "
                 "condor_q since 8.5: the owner the gateway takes you for, by your socket, certificate, password "
                 "or token)")
    _option(q, "better-analyze", "analyze", dest="analyze", action="store_true",
            help="why each job does not run: its Requirements against the pool's slots, condition by condition")
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
        act.add_argument("selections", nargs="*", type=_selection, metavar=SELECTION,
                         help=f"the jobs to {action.verb}")
        _option(act, "all", action="store_true", help=f"{action.verb} every job")
        _option(act, "constraint", metavar="EXPR", help=f"{action.verb} the jobs for which this expression is true")
        _option(act, "reason", metavar="TEXT",
                help=f"why (default: \"via birdbath {name} (by user YOU)\", as condor_{name} says it)")

    qedit = command("qedit", _qedit, "set attributes of queued jobs to ClassAd expressions (condor_qedit)")
    qedit.add_argument("words", nargs="+", metavar="WORD",
                       help=f"{SELECTION} (unless -constraint) then ATTR VALUE pairs; VALUE is ClassAd text "
                            f"(\"\\\"text\\\"\" for a string)")
    _option(qedit, "constraint", metavar="EXPR", help="the jobs for which this expression is true")

    wait = command("wait", _wait, "wait for a job, or every job of a cluster, to finish; the exit status is the "
                                  "job's exit code (for a cluster: 0 if every job exited 0, else the first other)")
    wait.add_argument("job", type=_job_or_cluster, metavar="ID", help="CLUSTER.PROC, or CLUSTER for all its jobs")
    _option(wait, "timeout", type=float, metavar="S", help="give up (status 1) after S seconds")

    fetch = command("fetch", _fetch, "download the spool files (the output) of a job, or of every job of a cluster "
                                     "in the queue (condor_transfer_data)")
    fetch.add_argument("job", type=_job_or_cluster, metavar="ID", help="the job (CLUSTER.PROC), or CLUSTER")
    fetch.add_argument("directory", type=Path, nargs="?", default=Path("."), metavar="DIR",
                       help="where the files go (default: here); created if missing")
    _option(fetch, "close", action="store_true", help="close the spool afterwards (the job may leave the queue)")

    dag = command("submit_dag", _submit_dag, "submit a DAG (condor_submit_dag)")
    dag.add_argument("file", type=Path, help="the DAG file, on a file system the gateway shares")
    _option(dag, "owner", metavar="NAME", help="the DAG's owner (default: the one the gateway gives you)")
    _option(dag, "wait", action="store_true", help="wait for the DAG and exit with its status")

    status = command("status", _status, "the pool's ads (condor_status): its machines' (slot) ads by default, or "
                                        "its schedulers', submitters', masters' or every ad", client=Collector)
    kind = status.add_mutually_exclusive_group()
    for name, kind_name, what in (("schedd", "schedd", "schedulers"), ("submitters", "submitter", "submitters"),
                                  ("master", "master", "masters"), ("any", "any", "every ad")):
        _option(kind, name, dest="kind", action="store_const", const=kind_name, help=what)
    _option(status, "constraint", metavar="EXPR", help="only ads for which this ClassAd expression is true")
    _formats(status)

    amqp = command("amqp-submit", _amqp_submit, "run a submit file's jobs as low-latency jobs over AMQP (the "
                   "gateway's [carod] front end), printing their replies; the results go to DIR",
                   client=lambda url, credentials=None: None)
    amqp.add_argument("file", type=Path, help="the submit description file (each proc becomes one message)")
    amqp.add_argument("directory", type=Path, nargs="?", default=Path("."), metavar="DIR",
                      help="where the final replies' result files are unpacked (default: the current directory)")
    _option(amqp, "broker", default=os.environ.get("BIRDBATH_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2F"),
            metavar="URL", help="the AMQP broker (default: $BIRDBATH_AMQP_URL, else amqp://guest:guest@127.0.0.1:5672/)")
    _option(amqp, "queue", default="grid", help="the work queue (default: grid, bound to amq.direct with KEY)")
    _option(amqp, "key", default="grid_key", help="its routing key on amq.direct (default: grid_key)")
    _option(amqp, "timeout", type=float, default=3600, metavar="S", help="give up after S seconds without a reply")

    token = command("token", _token, "bearer tokens: 'token create ...' makes an IDTOKEN signed with the gateway's "
                                     "key, as condor_token_create (see 'birdbath token create -help')",
                    client=lambda url, credentials=None: None)
    token.add_argument("action", choices=["create"], help="what to do")
    token.add_argument("options", nargs=argparse.REMAINDER, help="condor_token_create's options")

    command("version", lambda schedd, args: print(schedd.version(), schedd.platform(), sep="\n"),
            "the gateway's version and platform")
    return parser


def _help(parser: argparse.ArgumentParser) -> None:
    """-h, -help and --help, as HTCondor's tools take them (condor_q -h).  A mistyped -hld is still an error, not
    the help: argparse reads it as -h with the letters l and d, which are no options."""
    parser.add_argument("-h", "-help", "--help", action="help", help="show this help and exit")


def _url(parser: argparse.ArgumentParser, default: Any) -> None:
    _option(parser, "url", default=default,
            help="the gateway (default: $BIRDBATH_URL, else the local socket of the gateway on this machine, else "
                 "http://127.0.0.1:1984/); unix:PATH: a local socket; behind condor_shared_port: "
                 "<host:9618?sock=ID> or http://host:9618/?sock=ID")


def _client_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("birdbath-client")
    except PackageNotFoundError:  # run from a source tree that was not installed
        return "unknown"


def _token(_: None, args: argparse.Namespace) -> int:
    """``birdbath token create``: a command the gateway's distribution provides (entry point group
    ``birdbath.commands``), since it signs with the gateway's keys on the gateway's host."""
    found = entry_points(group=COMMANDS, name="token")
    if not found:
        print("birdbath token create: runs where the gateway is installed (it signs with the gateway's keys)",
              file=sys.stderr)
        return 1
    create = next(iter(found)).load()
    return create(args.options)


def _selections(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("selections", nargs="*", type=_selection, metavar=SELECTION,
                        help="only these jobs: a cluster, one job, or an owner's")
    _option(parser, "constraint", metavar="EXPR", help="only jobs for which this ClassAd expression is true")


def _formats(parser: argparse.ArgumentParser) -> None:
    form = parser.add_mutually_exclusive_group()
    _option(form, "long", action="store_true", help="whole job ads")
    _option(form, "af", "autoformat", dest="autoformat", nargs="+", metavar="ATTR",
            help="these attributes' values, one line per job (-af:jhlnrt as condor_q: job id, header, "
                 "Name = value, a line per value, raw ClassAd values, tabs)")
    _option(form, "format", dest="formats", nargs=2, action="append", metavar=("FMT", "ATTR"),
            help="printf-style, repeatable (%%d %%s %%f %%v), nothing added between: condor_q -format")
    _option(parser, "af-options", default="", help=argparse.SUPPRESS)


# -- commands ------------------------------------------------------------------------------------------
def _submit(schedd: Schedd | None, args: argparse.Namespace) -> int:
    """condor_submit: every cluster the file makes, in one transaction (a refusal submits nothing); the ads are
    made once the schedd gave each cluster its id, so ``$(Cluster)`` is the real one.  With -dry-run nothing is
    sent: the clusters are numbered from 1 and the ads written where -dry-run says."""
    from . import submitfile

    path, defined = _submit_words(args)
    appended = args.append + ([f"batch_name = {args.batch_name}"] if args.batch_name else [])
    clusters = submitfile.clusters(path, defined=defined, appended=appended)
    if schedd is None:
        return _dry_run(clusters, args)
    submitted = []
    with ProgressLine() as line, schedd.transaction() as txn:
        uploads = _Uploads(_bytes_progress(line, "uploading")) if args.spool else None
        for cluster in clusters:
            number = txn.new_cluster()
            jobs = _jobs(cluster, number, args.spool)
            if uploads is not None:
                uploads.count(jobs)
            submitted.append((number, txn.submit_cluster(number, jobs, uploads)))
    for number, jobs in submitted:
        print(f"{jobs[0]} - {jobs[-1]}" if args.terse else f"{len(jobs)} job(s) submitted to cluster {number}.")
    return 0


def _submit_words(args: argparse.Namespace) -> tuple[Path, list[str]]:
    """condor_submit's arguments: ``VAR=VALUE`` definitions, and one submit file."""
    defined = [word for word in args.words if _DEFINITION.match(word)]
    files = [word for word in args.words if not _DEFINITION.match(word)]
    if len(files) != 1:
        args.parser.error("give one submit description file (after any VAR=VALUE)")
    return Path(files[0]), defined


#: a ``VAR=VALUE`` argument of condor_submit (a file name with "=" in it would need ./ before it)
_DEFINITION = re.compile(r"[A-Za-z_+][\w.+]*\s*=")


def _jobs(cluster: Any, number: int, spool: bool) -> list[tuple[dict[str, Any], dict[str, Path]]]:
    """A cluster's ads for the cluster id ``number``, each with the files to spool (none without -spool)."""
    from . import spooling

    return [spooling.spooled(ad) if spool else (ad, {}) for ad in cluster.ads(number)]


def _dry_run(clusters: list[Any], args: argparse.Namespace) -> int:
    """condor_submit -dry-run: the ads, as -long prints them, to the file named (``-``: the standard output); with
    -spool too the ads are condor_submit's, whose Out keeps the submit file's path (out/job.0.out)."""
    texts, counts = [], []
    for number, cluster in enumerate(clusters, start=1):
        ads = cluster.ads(number)  # as condor_submit sends them: -spool's rewriting is the spool's (spooling.py)
        texts += [tables.long_form({"ClusterId": number, "ProcId": proc, **ad}) + "\n\n"
                  for proc, ad in enumerate(ads)]
        counts.append((number, len(ads)))
    if args.dry_run == "-":
        sys.stdout.write("".join(texts))
    else:
        Path(args.dry_run).write_text("".join(texts))
    for number, count in counts:
        print(f"{count} job(s) dry-run to cluster {number}.")
    return 0


class _Uploads:
    """One upload bar for a whole submission, not one per file: each file's progress (what the transaction
    reports) counted against the bytes of every file of the cluster's jobs (and the clusters' before it)."""

    def __init__(self, show: Progress) -> None:
        self.show = show
        self.sent = 0  # bytes of the files already sent whole
        self.total = 0

    def count(self, jobs: list[tuple[dict[str, Any], dict[str, Path]]]) -> None:
        self.total += sum(Path(path).stat().st_size for _, files in jobs for path in files.values())

    def __call__(self, done: int, size: int) -> None:
        if done == size:  # a file sent whole
            self.sent += size
            done = 0
        self.show(self.sent + done, self.total)


def _amqp_submit(_: None, args: argparse.Namespace) -> int:
    """Each job of the submit file as a message (its input files zipped in the body); the exit status is the last
    job's exit code, 1 for an error reply or a job that did not complete."""
    import io
    import zipfile

    from .amqp import Job, headers_of, input_zip, run_jobs
    from .submitfile import clusters

    jobs = []
    # a message has no cluster yet: the gateway gives it one when it takes the job ($(Cluster) is 0 here)
    for ad in (ad for cluster in clusters(args.file) for ad in cluster.ads(0)):
        iwd = Path(str(ad.pop("Iwd", args.file.parent)))
        names = [name.strip() for name in str(ad.pop("TransferInput", "")).split(",") if name.strip()]
        jobs.append(Job(headers_of(ad), input_zip(iwd / name for name in names) if names else b""))
    numbers = {job.message_id: index for index, job in enumerate(jobs)}
    status = 0

    def show(job: Job, reply: Any) -> None:
        nonlocal status
        name = f"job {numbers[job.message_id]} ({job.message_id})"
        if reply.error is not None:
            print(f"{name}: refused: {reply.error}")
            status = 1
            return
        line = f"{name}: JobStatus {reply.status}"
        if reply.final:
            line += "".join(f" {key} {reply.headers[key]}" for key in ("JobState", "ExitCode", "HoldReason")
                            if key in reply.headers)
            status = reply.headers.get("ExitCode", 1) if reply.status == 4 else 1
            if reply.body:
                archive = zipfile.ZipFile(io.BytesIO(reply.body))
                args.directory.mkdir(parents=True, exist_ok=True)
                archive.extractall(args.directory)
                line += f" results: {' '.join(sorted(archive.namelist()))}"
        print(line, flush=True)

    run_jobs(args.broker, jobs, queue=args.queue, key=args.key, timeout=args.timeout, on_reply=show)
    return int(status) if isinstance(status, int) else 1


#: condor_status's table for each kind it prints as one (the others print -long)
STATUS_TABLES = {"startd": status_tables.MACHINES, "schedd": status_tables.SCHEDDS,
                 "submitter": status_tables.SUBMITTERS}


def _status(collector: Collector, args: argparse.Namespace) -> int:
    kind = args.kind or "startd"
    ads = sorted(collector.query(kind, args.constraint), key=lambda ad: str(ad.get("Name", "")))
    columns = STATUS_TABLES.get(kind)
    if args.long or args.autoformat or args.formats or columns is None:
        args.long = args.long or not (args.autoformat or args.formats)
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
    if args.constraint:
        parse_constraint(args.constraint)  # a ValueError naming the caller's own text, not the combined one
    mine = None if args.allusers or args.selections else Selection(Scope.OWNER, owner=schedd.owner()).constraint()
    constraint = all_of(mine, any_of(args.selections), args.constraint, status and f"JobStatus == {int(status)}")
    ads = sorted(schedd.query(constraint), key=lambda ad: (ad.get("ClusterId", 0), ad.get("ProcId", 0)))
    if args.totals:
        print(tables.totals(ads))
        return 0
    if args.analyze:
        _analyze(schedd, ads)
        return 0
    if not (args.nobatch or args.view or args.long or args.autoformat or args.formats):
        everyone = schedd.query() if constraint else ads
        for line in batches.view(ads, everyone, schedd.url):
            print(line)
        _completed_note(ads)
        return 0
    _show(ads, args, columns)
    if not (args.long or args.autoformat or args.formats):
        print("\n" + tables.totals(ads))
        _completed_note(ads)
    return 0


def _completed_note(ads: list[dict[str, Any]]) -> None:
    """Completed jobs kept in the queue for their output (ST "C", DONE), set apart with what lets them leave."""
    done = [f"{ad.get('ClusterId')}.{ad.get('ProcId')}" for ad in ads if kept_for_output(ad)]
    if done:
        shown = " ".join(done[:5]) + (" ..." if len(done) > 5 else "")
        print(f"\n{len(done)} completed job(s) kept in the queue for their output ({shown}): "
              f"'birdbath fetch ID DIR -close' or 'birdbath rm ID' lets one leave.")


def _analyze(schedd: Schedd, ads: list[dict[str, Any]]) -> None:
    from .analysis import analyze

    slots = Collector(schedd.url, credentials=schedd.credentials).machines()
    for ad in ads:
        for line in analyze(ad, slots):
            print(line)
        print()


def _history(schedd: Schedd, args: argparse.Namespace) -> int:
    _show(schedd.history(all_of(any_of(args.selections), args.constraint), args.limit), args, tables.HISTORY)
    return 0


def _show(ads: list[dict[str, Any]], args: argparse.Namespace, columns: tuple[tables.Column, ...]) -> None:
    """The ads as -long, -af or the table the command shows by default."""
    if args.long:
        for ad in ads:
            print(tables.long_form(ad), end="\n\n")
    elif args.autoformat:
        if "h" in args.af_options:
            print(tables.autoformat_header(args.autoformat, args.af_options))
        for ad in ads:
            print(tables.autoformat(ad, args.autoformat, args.af_options))
    elif args.formats:
        for ad in ads:
            print(tables.printf(ad, args.formats), end="")
    else:
        for line in tables.table(columns, ads):
            print(line)


def _act(schedd: Schedd, args: argparse.Namespace) -> int:
    if sum((args.all, bool(args.selections), args.constraint is not None)) != 1:
        args.parser.error(f"give {SELECTION} arguments, -constraint EXPR or -all (one of them)")
    if args.constraint is not None:
        selections = [Selection.matching(args.constraint)]
    else:
        selections = [Selection.everything()] if args.all else args.selections
    reason = args.reason or args.action.default_reason(schedd.owner())
    failures = [selection for selection in selections if not _act_on(schedd, args.action, selection, reason)]
    return 1 if failures else 0


def _act_on(schedd: Schedd, action: Action, selection: Selection, reason: str | None) -> bool:
    """Apply the action to what one argument selects, print condor_rm's line for it; False if anything failed."""
    if selection.scope is Scope.JOB:
        return _act_on_job(schedd, action, selection.job, reason)
    found = schedd.query(selection.constraint())
    jobs = [JobId(ad["ClusterId"], ad["ProcId"]) for ad in found if JobStatus.of(ad) in action.acts_on]
    cleared = [JobId(ad["ClusterId"], ad["ProcId"]) for ad in found if action.clears(ad)]
    if not jobs and not cleared:
        _error(f"no job {_group(selection)}to {action.verb}")
        return False
    ok = True
    if jobs and action.verb == "remove" and selection.scope is Scope.CLUSTER:  # Birdbath's own call for it
        ok = _attempt(str(selection), lambda: schedd.remove_cluster(selection.cluster, reason))
    elif jobs:
        ok = all([_apply(schedd, action, job, reason) for job in jobs])  # a list: act on every job
    cleared_each = [_clear(schedd, job) for job in cleared]  # every one, also after a failure
    ok = ok and all(cleared_each)
    if ok:
        print(f"All jobs {_group(selection)}have been {action.done}.")
    return ok


def _group(selection: Selection) -> str:
    """condor_rm's words for a group of jobs: "in cluster 27 ", 'of user "alice" ', "matching constraint (...) ",
    or nothing for all."""
    if selection.scope is Scope.CLUSTER:
        return f"in {selection} "
    if selection.scope is Scope.OWNER:
        return f"of {selection} "
    if selection.scope is Scope.CONSTRAINT:
        return f"matching {selection} "
    return ""


def _qedit(schedd: Schedd, args: argparse.Namespace) -> int:
    """condor_qedit: ``JOB|CLUSTER|OWNER ATTR VALUE...`` or ``-constraint EXPR ATTR VALUE...``."""
    words = list(args.words)
    if args.constraint is not None:
        selection = Selection.matching(args.constraint)
    else:
        try:
            selection = Selection.parse(words.pop(0))
        except ValueError as exc:
            args.parser.error(str(exc))
    if not words or len(words) % 2:
        args.parser.error("give ATTR VALUE pairs after the jobs")
    pairs = list(zip(words[::2], words[1::2]))
    jobs = [JobId(ad["ClusterId"], ad["ProcId"]) for ad in schedd.query(selection.constraint())]
    if not jobs:
        _error(f"no job {_group(selection)}to edit")
        return 1
    for name, value in pairs:
        for job in jobs:
            schedd.set_attribute(job, name, value)
        print(f'Set attribute "{name}" for {len(jobs)} matching job{"s" if len(jobs) != 1 else ""}.')
    return 0


def _act_on_job(schedd: Schedd, action: Action, job: JobId, reason: str | None) -> bool:
    """One job named by its id: one not in a state the action applies to is refused as condor_hold refuses it
    ("Job 15.0 is already held.")."""
    current = schedd.job(job)
    state = None if current is None else JobStatus.of(current)
    if current is not None and action.clears(current):
        if _clear(schedd, job):
            print(f"Job {job} was completed; it has left the queue.")
            return True
        return False
    if state not in action.acts_on:
        _error(action.refusal(job, state))
        return False
    if _apply(schedd, action, job, reason):
        print(f"Job {job} {action.done}.")
        return True
    return False


def _apply(schedd: Schedd, action: Action, job: JobId, reason: str | None) -> bool:
    """Act on one job; a job that left the action's states meanwhile (a DAG's node its DAG's removal removed) is
    no failure: what was asked is done."""
    try:
        getattr(schedd, action.verb)(job, reason)
        return True
    except GatewayError as exc:
        current = schedd.job(job)
        if current is None or JobStatus.of(current) not in action.acts_on:
            return True
        _error(f"job {job}: {exc}")
        return False


def _clear(schedd: Schedd, job: JobId) -> bool:
    """Let a finished job that stays queued for its output leave: close its spool (its output is retrieved, as
    closeSpool says), which ends a ``LeaveJobInQueue`` that waits for ``FilesRetrieved``; False with the reason if
    the gateway refuses (another user's job) or the job stays all the same."""
    if not _attempt(f"job {job}", lambda: schedd.close_spool(job)):
        return False
    if schedd.job(job) is not None:
        _error(f"Job {job} is completed, and its LeaveJobInQueue keeps it in the queue after its spool was closed.")
        return False
    return True


def _attempt(what: str, call: Callable[[], None]) -> bool:
    """A failed action is reported and does not stop the others (condor_rm goes on too)."""
    try:
        call()
        return True
    except GatewayError as exc:
        _error(f"{what}: {exc}")
        return False


def _wait(schedd: Schedd, args: argparse.Namespace) -> int:
    if args.job.scope is Scope.JOB:
        return _wait_for(schedd, args.job.job, args.timeout)
    return _wait_for_cluster(schedd, args.job.cluster, args.timeout)


def _wait_for_cluster(schedd: Schedd, cluster: int, timeout: float | None) -> int:
    """Every job of the cluster, those still queued and those that already left the queue for the history, one
    after the other, as condor_wait waits for every job of a log; 0 if each exited 0, else the first other status
    (by proc), so that a script never takes a failed job for a success."""
    constraint = f"ClusterId == {cluster}"
    try:
        gone = schedd.history(constraint)
    except GatewayUnavailable:  # no submission API (an HTCondor schedd): only the queue can be asked
        gone = []
    jobs = sorted({JobId(ad["ClusterId"], ad["ProcId"]) for ad in [*schedd.query(constraint), *gone]})
    if not jobs:
        raise UnknownJob("wait", f"cluster {cluster} is unknown (neither in the queue nor in the history)")
    deadline = None if timeout is None else time.monotonic() + timeout
    statuses = []
    for job in jobs:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        statuses.append(_wait_for(schedd, job, left))
    print(f"All jobs in cluster {cluster} done.")
    return next((status for status in statuses if status), 0)


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
    """condor_transfer_data: one job, or every job of a cluster that is in the queue (the files of each go to DIR,
    where the submit file put them)."""
    if args.job.scope is Scope.JOB:
        jobs = [args.job.job]
    else:
        jobs = sorted(JobId(ad["ClusterId"], ad["ProcId"]) for ad in schedd.query(args.job.constraint()))
        if not jobs:
            raise UnknownJob("listSpool", f"no job of {args.job} is in the queue (its spool went with it)")
    for job in jobs:
        with ProgressLine() as line:
            written = schedd.download(job, args.directory, progress=_bytes_progress(line, "downloading"))
        for path in written:
            print(path)
        if args.close:
            schedd.close_spool(job)
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
    """A status line on stderr, redrawn in place on a terminal.  Leaving the ``with`` block ends it with a newline
    (also on an error) so that what follows, a result, an error or the shell's prompt, starts on a line of its own.
    Where stderr is no terminal (a log file, a pipe) a redraw would pile every frame onto one line: there only the
    last text is written, once, when the block ends."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.width = 0  # of the longest text shown, to blank out what a shorter one would leave behind
        self.last: str | None = None
        try:
            self.terminal = self.stream.isatty()
        except (AttributeError, ValueError):  # a closed or replaced stream
            self.terminal = False

    def show(self, text: str) -> None:
        self.last = text
        if self.terminal:
            print("\r" + text.ljust(self.width), end="", file=self.stream, flush=True)
            self.width = max(self.width, len(text))

    def __enter__(self) -> "ProgressLine":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if self.terminal and self.width:
            print(file=self.stream, flush=True)
        elif not self.terminal and self.last is not None:
            print(self.last, file=self.stream, flush=True)


def _bytes_progress(line: ProgressLine, verb: str, width: int = 30) -> Progress:
    def show(done: int, total: int) -> None:
        filled = width if total == 0 else int(width * done / total)
        line.show(f"{verb} [{'#' * filled}{'.' * (width - filled)}] {done}/{total} bytes")
    return show


if __name__ == "__main__":
    sys.exit(main())

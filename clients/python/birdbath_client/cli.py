"""``birdbath``: HTCondor-style commands against a Birdbath gateway.

    birdbath [--url URL] submit FILE.sub [--spool]     submit a submit description (condor_submit)
    birdbath q [-constraint EXPR] [-long | -af ATTR...] list jobs (condor_q)
    birdbath rm|hold|release ID... [-reason TEXT]      act on jobs (condor_rm, condor_hold, condor_release)
    birdbath wait ID [--timeout S]                     wait for a job, with a progress line
    birdbath fetch ID [DIR]                            download a job's spool (output) files
    birdbath submit_dag FILE.dag [--owner NAME] [--wait]
    birdbath version

The gateway URL comes from --url, else BIRDBATH_URL, else http://127.0.0.1:1984/.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from .errors import GatewayError, GatewayUnavailable
from .schedd import JOB_STATES, JobId, Schedd

DONE_VERBS = {"remove": "marked for removal", "hold": "held", "release": "released"}
STATE_LETTERS = {1: "I", 2: "R", 3: "X", 4: "C", 5: "H", 6: ">", 7: "S"}


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        schedd = Schedd(args.url)
        return args.run(schedd, args) or 0
    except (GatewayUnavailable, GatewayError, TimeoutError, FileNotFoundError, ValueError) as exc:
        print(f"birdbath: {exc}", file=sys.stderr)
        return 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="birdbath", description="HTCondor-style commands for a Birdbath gateway")
    parser.add_argument("--url", default=os.environ.get("BIRDBATH_URL", "http://127.0.0.1:1984/"))
    commands = parser.add_subparsers(required=True, metavar="COMMAND")

    submit = commands.add_parser("submit", help="submit a submit description file")
    submit.add_argument("file", type=Path)
    submit.add_argument("--spool", action="store_true",
                        help="send the executable and input files to the gateway instead of sharing a file system")
    submit.set_defaults(run=_submit)

    q = commands.add_parser("q", help="list jobs like condor_q")
    q.add_argument("-constraint", "--constraint")
    q.add_argument("-long", "--long", action="store_true")
    q.add_argument("-af", "--autoformat", nargs="+", metavar="ATTR")
    q.set_defaults(run=_q)

    for name, verb in (("rm", "remove"), ("hold", "hold"), ("release", "release")):
        action = commands.add_parser(name, help=f"{verb} jobs")
        action.add_argument("jobs", nargs="+", type=JobId.parse, metavar="ID")
        action.add_argument("-reason", "--reason")
        action.set_defaults(run=_act, verb=verb)

    wait = commands.add_parser("wait", help="wait for a job to finish")
    wait.add_argument("job", type=JobId.parse, metavar="ID")
    wait.add_argument("--timeout", type=float)
    wait.set_defaults(run=_wait)

    fetch = commands.add_parser("fetch", help="download a job's spool files")
    fetch.add_argument("job", type=JobId.parse, metavar="ID")
    fetch.add_argument("directory", type=Path, nargs="?", default=Path("."))
    fetch.add_argument("--close", action="store_true", help="close the spool afterwards (the job may leave)")
    fetch.set_defaults(run=_fetch)

    dag = commands.add_parser("submit_dag", help="submit a DAG like condor_submit_dag")
    dag.add_argument("file", type=Path)
    dag.add_argument("--owner")
    dag.add_argument("--wait", action="store_true", help="wait for the DAG and exit with its status")
    dag.set_defaults(run=_submit_dag)

    version = commands.add_parser("version", help="the gateway's version and platform")
    version.set_defaults(run=lambda schedd, args: print(schedd.version(), schedd.platform(), sep="\n"))
    return parser


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
    jobs = schedd.submit_many(ads, files, progress=_bytes_progress("uploading") if files else None)
    print(f"{len(jobs)} job(s) submitted to cluster {jobs[0].cluster}.")
    return 0


def _keep() -> Any:
    from .ads import Expr

    return Expr("FilesRetrieved =?= false")


def _q(schedd: Schedd, args: argparse.Namespace) -> int:
    ads = schedd.query(args.constraint)
    if args.long:
        for ad in ads:
            print("\n".join(f"{name} = {_classad_text(value)}" for name, value in ad.items()), end="\n\n")
        return 0
    if args.autoformat:
        for ad in ads:
            print(" ".join(str(ad.get(name, "undefined")) for name in args.autoformat))
        return 0
    print(" ID        OWNER            SUBMITTED     RUN_TIME ST PRI SIZE    CMD")
    now = time.time()
    for ad in sorted(ads, key=lambda a: (a.get("ClusterId", 0), a.get("ProcId", 0))):
        print(_q_line(ad, now))
    counts = {state: sum(1 for ad in ads if ad.get("JobStatus") == number) for number, state in JOB_STATES.items()}
    print(f"\n{len(ads)} jobs; " + ", ".join(f"{counts[s]} {s.lower()}" for s in
                                            ("Completed", "Removed", "Idle", "Running", "Held", "Suspended")))
    return 0


def _q_line(ad: dict[str, Any], now: float) -> str:
    job = f"{ad.get('ClusterId')}.{ad.get('ProcId')}"
    submitted = time.strftime("%m/%d %H:%M", time.localtime(ad.get("QDate", 0)))
    run = float(ad.get("RemoteWallClockTime", 0.0))
    if ad.get("JobStatus") == 2:
        run += now - float(ad.get("JobCurrentStartDate", now))
    days, rest = divmod(int(run), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    size = float(ad.get("ImageSize", 0)) / 1024
    command = " ".join(part for part in (os.path.basename(str(ad.get("Cmd", ""))),
                                         str(ad.get("Arguments", ad.get("Args", "")))) if part)
    return (f"{job:<10} {str(ad.get('Owner', '')):<14} {submitted}  {days}+{hours:02d}:{minutes:02d}:{seconds:02d} "
            f"{STATE_LETTERS.get(ad.get('JobStatus'), '?'):<2} {ad.get('JobPrio', 0):<3} {size:<7.1f} {command}")


def _classad_text(value: Any) -> str:
    from .ads import Expr

    if isinstance(value, Expr):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return str(value)


def _act(schedd: Schedd, args: argparse.Namespace) -> int:
    failed = 0
    for job in args.jobs:
        try:
            getattr(schedd, args.verb)(job, args.reason)
            print(f"Job {job} {DONE_VERBS[args.verb]}.")
        except GatewayError as exc:
            print(f"birdbath: job {job}: {exc}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


def _wait(schedd: Schedd, args: argparse.Namespace) -> int:
    started = time.monotonic()

    def show(ad: dict[str, Any] | None) -> None:
        state = "left the queue" if ad is None else JOB_STATES.get(ad.get("JobStatus"), "?")
        spinner = "|/-\\"[int((time.monotonic() - started) * 4) % 4]
        print(f"\r{spinner} job {args.job}: {state:<20} {time.monotonic() - started:6.1f} s", end="",
              file=sys.stderr, flush=True)

    final = schedd.wait(args.job, timeout=args.timeout, poll=0.25, progress=show)
    print(file=sys.stderr)
    if final is None:
        raise GatewayError("wait", "UNKNOWNJOB", f"job {args.job} is not in the queue")
    code = final.get("ExitCode")
    print(f"job {args.job}: {JOB_STATES.get(final.get('JobStatus'), '?')}"
          + (f", exit code {code}" if code is not None else ""))
    return int(code) if isinstance(code, int) else 0


def _fetch(schedd: Schedd, args: argparse.Namespace) -> int:
    written = schedd.download(args.job, args.directory, progress=_bytes_progress("downloading"))
    print(file=sys.stderr)
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
    args.job, args.timeout = job, None
    status = _wait(schedd, args)
    schedd.close_spool(job)
    return status


def _bytes_progress(verb: str):
    def show(done: int, total: int) -> None:
        width = 30
        filled = width if total == 0 else int(width * done / total)
        print(f"\r{verb} [{'#' * filled}{'.' * (width - filled)}] {done}/{total} bytes", end="", file=sys.stderr,
              flush=True)
    return show


if __name__ == "__main__":
    sys.exit(main())

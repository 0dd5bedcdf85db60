"""Short jobs on the local backend (issue #45's first item): ``--jobs`` ``/bin/true`` jobs submitted in one
transaction to a gateway with 2 slots, from the commit to the last one leaving the queue, against this process
starting ``/bin/true`` two at a time (what starting a process costs here), measured interleaved; and the CPU time per
job over the same window (``/proc``: a figure a loaded machine spreads less than the rates) of the gateway's process
(its reactor and the backend's threads share one interpreter lock, so it bounds the rate), and of everything below
it (the launcher server, its launchers, their jobs).

Every job runs under the controls jobs have (a launcher keeping its whole process tree, its cgroup where the
gateway runs as root, its memory request enforced, its usage reported): this measures what those cost a job that
does nothing.  ``--tree DIR`` (repeatable) also runs the same jobs on the gateway of another checkout, interleaved
with this tree's (every other round in the reverse order), so that a change is measured against the tree before
it in one run on a loaded machine; the ratios are then taken between figures of the same run.

Run: ``python bench/short_jobs.py [--jobs 300] [--runs 3] [--tree /path/to/other/checkout] [--execute /dev/shm]``.  Prints figures;
asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Callable

os.environ.setdefault("CONDOR_CONFIG", "/dev/null")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from figures import Figure, interleaved, print_figures  # noqa: E402
from queue_scale import RUNNER, spawn_two_at_a_time, trivial_jobs  # noqa: E402
from servers import TreeGateway  # noqa: E402

from gateway.testing import GatewayProcess  # noqa: E402


def cpu_seconds(gateway: GatewayProcess) -> tuple[float, float]:
    """The CPU time so far of the gateway's own process (all its threads), and of everything below it: every living
    process below it, and what the children each of them (the gateway too) reaped used (the launcher server, its
    launchers, their jobs; a launcher the gateway spawned and reaped itself)."""
    assert gateway.process is not None
    own, below = _cpu(gateway.process.pid)
    for pid in descendants(gateway.process.pid):
        below += sum(_cpu(pid))
    return own, below


def _cpu(pid: int) -> tuple[float, float]:
    """A process's user and system CPU seconds, and its reaped children's; none for one gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0, 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    return sum(int(value) for value in fields[11:13]) / ticks, sum(int(value) for value in fields[13:15]) / ticks


def descendants(root: int) -> list[int]:
    """Every living process below ``root`` (the launcher server, and the launchers it keeps between jobs: their CPU
    is their own until they end, then their parent's reaped children's)."""
    tree, found, stack = _tree(), [], [root]
    while stack:
        below = tree.get(stack.pop(), [])
        found += below
        stack += below
    return found


def _tree() -> dict[int, list[int]]:
    """Each process's children, from one look at /proc."""
    tree: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                parent = int(Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            tree.setdefault(parent, []).append(int(entry.name))
    return tree


def run_jobs(gateway: GatewayProcess, jobs: int, iwd: Path, cpu: tuple[Figure, Figure]) -> float:
    """Jobs/s of one run, adding to ``cpu`` the CPU milliseconds per job the gateway's process, and the processes
    below it, took from the commit to the last job leaving the queue (the submission before is not counted)."""

    def window() -> Callable[[], None]:
        before = cpu_seconds(gateway)

        def ended() -> None:
            after = cpu_seconds(gateway)
            for figure, spent in zip(cpu, (after[0] - before[0], after[1] - before[1])):
                figure.add(spent * 1000 / jobs)
        return ended
    return trivial_jobs(gateway.port, jobs, iwd, window)  # type: ignore[arg-type]


def measure(tmp: Path, jobs: int, runs: int, trees: list[Path], execute: Path | None) -> None:
    iwd = tmp / "iwd"
    iwd.mkdir()
    os.chmod(tmp, 0o755)
    gateways = {"this tree": GatewayProcess(tmp / "runner", RUNNER, tmp=tmp)}
    if execute is not None:
        elsewhere = RUNNER.replace("[backends.local]\n", f'[backends.local]\nexecute = "{execute}"\n')
        gateways[f"this tree, execute in {execute.parent.parent}"] = GatewayProcess(tmp / "runner-execute", elsewhere, tmp=tmp)
    gateways |= {str(tree): TreeGateway(tree, tmp / f"runner-{number}", RUNNER, tmp) for number, tree in
                 enumerate(trees)}
    figures = {name: Figure(f"{jobs} /bin/true jobs, 2 slots, {name}", "jobs/s") for name in gateways}
    cpu = {name: (Figure(f"CPU per job, the gateway's process, {name}", "ms", higher_is_better=False),
                  Figure(f"CPU per job, below it (launchers, jobs), {name}", "ms", higher_is_better=False))
           for name in gateways}
    spawned = Figure("Python spawning /bin/true 2 at a time", "jobs/s")
    try:
        for gateway in gateways.values():
            gateway.start()
        measurements = [*((figures[name], lambda name=name, gateway=gateway: run_jobs(gateway, jobs, iwd, cpu[name]))
                          for name, gateway in gateways.items()),
                        (spawned, lambda: spawn_two_at_a_time(jobs))]
        for run in range(runs):  # each round in turn the other way round: the first gateway of a round ran
            # faster in a fixed order (up to a fifth, on a loaded machine), whichever tree it was
            interleaved(measurements if run % 2 == 0 else measurements[::-1], 1)
    finally:
        for gateway in gateways.values():
            gateway.stop()
    print_figures(f"short jobs (load average {os.getloadavg()[0]:.1f} at the end)",
                  [*((figure, spawned) for figure in figures.values()), (spawned, None),
                   *((figure, None) for pair in cpu.values() for figure in pair)])
    for name, figure in figures.items():
        if name != "this tree":
            print(f"this tree against {name}: {figures['this tree'].ratio_to(figure):.2f} the jobs/s, "
                  f"{cpu['this tree'][0].ratio_to(cpu[name][0]):.2f} the gateway's CPU per job, "
                  f"{cpu['this tree'][1].ratio_to(cpu[name][1]):.2f} the CPU below it (> 1: better)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tree", type=Path, action="append", default=[],
                        help="another checkout whose gateway runs the same jobs, interleaved (the 'before')")
    parser.add_argument("--execute", type=Path, help="a directory for another gateway's execute directory")
    args = parser.parse_args()
    print(f"short jobs on the local backend ({os.cpu_count()} CPUs, euid {os.geteuid()}), "
          f"{time.strftime('%Y-%m-%d %H:%M')}")
    with tempfile.TemporaryDirectory() as scratch, \
            (tempfile.TemporaryDirectory(dir=args.execute) if args.execute else nullcontext()) as elsewhere:
        if elsewhere is not None:
            os.chmod(elsewhere, 0o755)  # (as the state's: jobs running as their owners reach their directories)
        measure(Path(scratch), args.jobs, args.runs, [tree.resolve() for tree in args.tree],
                None if elsewhere is None else Path(elsewhere) / "execute")


if __name__ == "__main__":
    main()

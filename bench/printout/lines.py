"""What every part's printout shares: a target's verdict, a load's line and how the loads
ran, kept in one place so that every part words them alike; and the PostgreSQL cluster
that several parts' lines share, or why they are skipped.
"""

import os
from contextlib import ExitStack

from bench import loopback, postgres
from bench.environs import InvalidRun
from bench.load import LoadResult


def verdict(passed: bool) -> str:
    return "pass" if passed else "FAIL"


def invalid_note(run: LoadResult, expected: int = 200) -> str:
    """Nothing for a valid run; for another, what was wrong with it."""
    if run.valid:
        return ""
    return f"  INVALID: {run.unexpected} answers not {expected}, {run.socket_errors} socket errors"


def describe_runs(name: str, figures: loopback.Figures, expected: int = 200) -> str:
    line = (
        f"  {name:18} {figures.per_second:7.0f} req/s  p50 {figures.p50_us / 1000:6.2f} ms"
        f"  p99 {figures.p99_us / 1000:6.2f} ms"
    )
    for run in figures.runs:
        line += invalid_note(run, expected)
    return line


def print_setup(setup: loopback.Setup, args, connections: str | None = None) -> None:
    cpus = len(os.sched_getaffinity(0))
    if setup.server_cpu is not None:
        pinning = f"server on CPU {setup.server_cpu}, {setup.generator} on CPU {setup.load_cpu}"
    elif cpus > 1:
        pinning = f"nothing pinned: server and {setup.generator} share {cpus} CPUs"
    else:
        pinning = f"one CPU: server and {setup.generator} share it"
    print(
        f"  gunicorn -c gunicorn.conf.py; {pinning}; {connections or args.connections} connections;"
        f" median of {args.loopback_rounds} runs of {args.seconds} s"
    )


def start_cluster(stack: ExitStack, setup: loopback.Setup, durable: bool = False):
    """A PostgreSQL cluster for the parts' PostgreSQL lines, or None, said why, if none can be."""
    reason = postgres.unavailable()
    if reason:
        print(f"\nPostgreSQL: its lines are skipped, {reason}")
        return None
    return stack.enter_context(postgres.cluster(setup.server_cpu, durable))


def sized_over_loopback(measure, setup: loopback.Setup, cluster, args):
    """What `measure` (a part's `over_loopback`) gives for a small and a big store under the
    run's settings; None, once `INVALID` and why are printed, for a run that measured
    something else."""
    try:
        return measure(
            setup,
            args.small_plants,
            args.plants,
            cluster,
            args.loopback_rounds,
            args.seconds,
            args.connections,
        )
    except InvalidRun as ex:
        print(f"  INVALID: {ex}")
        return None

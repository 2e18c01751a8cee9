"""`python -m bench`: measure, side by side with the floor, and print figures against targets.

A run with any wrong answer is reported INVALID (exit status 1): it measured something else.
Targets missed are reported, not fatal: this is a benchmark, not a test.
"""

import argparse
import os
import platform
import subprocess
import sys
from contextlib import ExitStack
from importlib.metadata import version

from bench import inprocess, loopback
from bench.printout.durability import run_durable
from bench.printout.feed import run_feed
from bench.printout.growth import run_loopback_pages, run_memory, run_pages, run_tail
from bench.printout.lines import start_cluster
from bench.printout.speed import run_inprocess, run_loopback, run_loopback_reads
from bench.printout.webhooks import run_delivery, run_loopback_webhooks
from bench.profiling import profile
from bench.server import ROOT

PARTS = (
    "inprocess",
    "pages",
    "loopback",
    "loopback-reads",
    "durable",
    "loopback-webhooks",
    "delivery",
    "loopback-pages",
    "feed",
    "tail",
    "memory",
)
#: The parts served by gunicorn over loopback: all but those measured in process.
LOOPBACK_PARTS = set(PARTS) - {"inprocess", "pages", "memory"}
LIBRARIES = ("falcon", "marshmallow", "orjson", "gunicorn")
#: Where `loopback` and `durable` run the service: pinned to one CPU, a worker (what a one-core
#: host runs), and as `plantstore serve` runs it here (`bench.loopback.as_served`).
PLACEMENTS = ("pinned", "as-served")


def print_machine() -> None:
    commit = subprocess.run(
        ["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    libraries = ", ".join(f"{name} {version(name)}" for name in LIBRARIES)
    print(
        f"commit {commit or '?'}; Python {platform.python_version()}, {libraries};"
        f" {len(os.sched_getaffinity(0))} CPUs"
    )


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "--parts",
        nargs="+",
        choices=PARTS,
        default=PARTS,
        metavar="PART",
        help="what to measure (all by default): inprocess (POST, GET /plants/{id}, the ETag's"
        " share of a GET), pages (in process), loopback (POST and PUT throughput, beside the"
        " floor and FastAPI + uvicorn; creates with the token from a tokens file),"
        " loopback-reads (GET /plants/{id} answered 200 and 304), loopback-webhooks (POST"
        " throughput with webhooks to a subscriber that never answers), durable (creates,"
        " replaces and deletes on SQLite and on a PostgreSQL with fsync on, against the memory"
        " store, at 8 and 64 connections whatever --connections says, and what a request costs"
        " them, counted), delivery (webhooks' delay and"
        " throughput), loopback-pages, feed (GET /events beside GET /plants, and against the"
        " feed's size), tail, memory",
    )
    parser.add_argument(
        "--placements",
        nargs="+",
        choices=PLACEMENTS,
        default=PLACEMENTS,
        metavar="PLACEMENT",
        help="how loopback and durable run the service (both by default): pinned (server and"
        " load generator each on a CPU of its own) and as-served (nothing pinned: a worker a core"
        " with a shared store, as `plantstore serve` runs here); the other parts run pinned",
    )
    parser.add_argument("--rounds", type=int, default=15, help="in-process rounds")
    parser.add_argument("--batch", type=int, default=2000, help="in-process requests a round")
    parser.add_argument(
        "--page-batch", type=int, default=500, help="in-process pages a round, of each case"
    )
    parser.add_argument("--loopback-rounds", type=int, default=3, help="runs of each server")
    parser.add_argument("--seconds", type=int, default=10, help="length of one loopback run")
    parser.add_argument("--connections", type=int, default=8, help="keep-alive connections")
    parser.add_argument(
        "--delivery-rate",
        type=int,
        default=100,
        help="creates a second while webhooks' delay is measured (below what delivery can do)",
    )
    parser.add_argument(
        "--generator",
        choices=("wrk", "python"),
        default="wrk",
        help="load generator (wrk falls back to python when it cannot be had)",
    )
    parser.add_argument(
        "--plants", type=int, default=1_000_000, help="plants for tail, memory, big pages and feed"
    )
    parser.add_argument(
        "--small-plants", type=int, default=1_000, help="plants of the small store of pages, feed"
    )
    parser.add_argument("--sqlite-plants", type=int, default=100_000)
    parser.add_argument(
        "--profile",
        choices=["floor", *inprocess.CASES],
        help="profile this in-process case instead of benchmarking",
    )
    return parser


def run_as_served(setup: loopback.Setup, args) -> bool:
    """`loopback` and `durable` again, as `plantstore serve` runs the service on this machine."""
    valid = True
    if not {"loopback", "durable"} & set(args.parts):
        return valid
    print("\nas `plantstore serve` runs here: nothing pinned, a worker a core with a shared store")
    with ExitStack() as stack:
        if "loopback" in args.parts:
            valid &= run_loopback(setup, start_cluster(stack, setup), args)
    if "durable" in args.parts:
        valid &= run_durable(setup, args)
    return valid


def main(argv: list[str]) -> int:
    args = make_parser().parse_args(argv)
    if args.profile:
        print(profile(args.profile, args.batch * 10))
        return 0
    print_machine()
    valid = True
    if "inprocess" in args.parts:
        valid &= run_inprocess(args)
    if "pages" in args.parts:
        valid &= run_pages(args)
    if LOOPBACK_PARTS & set(args.parts):
        setup = loopback.choose_setup(args.generator)
        with ExitStack() as stack:
            cluster = None
            if {"loopback", "loopback-reads", "loopback-pages", "feed"} & set(args.parts):
                cluster = start_cluster(stack, setup)
            if "loopback" in args.parts and "pinned" in args.placements:
                valid &= run_loopback(setup, cluster, args)
            if "loopback-reads" in args.parts:
                valid &= run_loopback_reads(setup, cluster, args)
            if "durable" in args.parts and "pinned" in args.placements:
                valid &= run_durable(setup, args)
            if "loopback-webhooks" in args.parts:
                valid &= run_loopback_webhooks(setup, args)
            if "delivery" in args.parts:
                valid &= run_delivery(setup, args)
            if "loopback-pages" in args.parts:
                valid &= run_loopback_pages(setup, cluster, args)
            if "feed" in args.parts:
                valid &= run_feed(setup, cluster, args)
        if "tail" in args.parts:
            valid &= run_tail(setup, args)
        if "as-served" in args.placements:
            valid &= run_as_served(loopback.as_served(setup), args)
    if "memory" in args.parts:
        valid &= run_memory(args)
    return 0 if valid else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""`python -m bench`: measure, side by side with the floor, and print figures against targets.

A run with any wrong answer is reported INVALID (exit status 1): it measured something else.
Targets missed are reported, not fatal: this is a benchmark, not a test.
"""

import argparse
import os
import platform
import subprocess
import sys
from importlib.metadata import version

from bench import inprocess, loopback, memory
from bench.environs import InvalidRun
from bench.profiling import profile
from bench.server import ROOT

PARTS = ("inprocess", "loopback", "tail", "memory")
LIBRARIES = ("falcon", "marshmallow", "orjson", "gunicorn")


def verdict(passed: bool) -> str:
    return "pass" if passed else "FAIL"


def print_machine() -> None:
    commit = subprocess.run(
        ["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    libraries = ", ".join(f"{name} {version(name)}" for name in LIBRARIES)
    print(
        f"commit {commit or '?'}; Python {platform.python_version()}, {libraries};"
        f" {len(os.sched_getaffinity(0))} CPUs"
    )


def run_inprocess(args) -> bool:
    print(f"\nin-process: µs per request, median of {args.rounds} rounds of {args.batch}")
    try:
        medians = inprocess.measure(args.rounds, args.batch)
    except InvalidRun as ex:
        print(f"  INVALID: {ex}")
        return False
    targets = {"success": 2.5, "401": 1.5, "400": 4.0}
    floor = medians["floor"]
    print(f"  {'floor':8} {floor:7.1f} µs")
    for name, limit in targets.items():
        ratio = medians[name] / floor
        print(
            f"  {name:8} {medians[name]:7.1f} µs  {ratio:4.2f}x floor  "
            f"(target ≤ {limit}x: {verdict(ratio <= limit)})"
        )
    return True


def describe_runs(name: str, figures: loopback.Figures) -> str:
    line = (
        f"  {name:16} {figures.per_second:7.0f} req/s  p50 {figures.p50_us / 1000:6.2f} ms"
        f"  p99 {figures.p99_us / 1000:6.2f} ms"
    )
    for run in figures.runs:
        if not run.valid:
            line += (
                f"  INVALID: {run.unexpected} answers not 200, {run.socket_errors} socket errors"
            )
    return line


def print_setup(setup: loopback.Setup, args) -> None:
    pinning = (
        f"server on CPU {setup.server_cpu}, {setup.generator} on CPU {setup.load_cpu}"
        if setup.server_cpu is not None
        else f"one CPU: server and {setup.generator} share it"
    )
    print(
        f"  gunicorn -c gunicorn.conf.py; {pinning}; {args.connections} connections;"
        f" median of {args.loopback_rounds} runs of {args.seconds} s"
    )


def run_loopback(setup: loopback.Setup, args) -> bool:
    print("\nover loopback: POST /plants, a fresh id each request")
    print_setup(setup, args)
    results = loopback.throughput(setup, args.loopback_rounds, args.seconds, args.connections)
    floor = results.pop("floor")
    print(describe_runs("floor", floor))
    for store, figures in results.items():
        share = figures.per_second / floor.per_second
        # The target is the memory store's: a durable store waits for the disk at every create.
        target = f"target ≥ 85%: {verdict(share >= 0.85)}" if store == "memory" else "durable"
        print(describe_runs(store, figures) + f"  {share:4.0%} of floor ({target})")
    return floor.valid and all(figures.valid for figures in results.values())


def run_tail(setup: loopback.Setup, args) -> bool:
    print(f"\ntail latency: memory store empty vs holding {args.plants:,} plants")
    print_setup(setup, args)
    (empty_name, empty), (full_name, full) = loopback.tail(
        setup, args.plants, args.loopback_rounds, args.seconds, args.connections
    ).items()
    ratio = full.p99_us / empty.p99_us
    print(describe_runs(empty_name, empty))
    print(
        describe_runs(full_name, full)
        + f"  p99 {ratio:4.2f}x empty (target ≤ 1.5x: {verdict(ratio <= 1.5)})"
    )
    return empty.valid and full.valid


def run_memory(args) -> bool:
    print("\nmemory: bytes per stored plant, created through the app (plant-123456, tag tree)")
    per_plant = memory.memory_store_bytes_per_plant(args.plants)
    print(
        f"  memory store, RSS growth over {args.plants:,} plants: {per_plant:6.0f} B"
        f"  (target ≤ 200: {verdict(per_plant <= 200)})"
    )
    per_plant = memory.sqlite_bytes_per_plant(args.sqlite_plants)
    if per_plant is None:
        print("  SQLite file: skipped, there is no plantstore.stores.sqlite yet")
    else:
        print(f"  SQLite files over {args.sqlite_plants:,} plants: {per_plant:6.0f} B")
    return True


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=PARTS)
    parser.add_argument("--rounds", type=int, default=15, help="in-process rounds")
    parser.add_argument("--batch", type=int, default=2000, help="in-process requests a round")
    parser.add_argument("--loopback-rounds", type=int, default=3, help="runs of each server")
    parser.add_argument("--seconds", type=int, default=10, help="length of one loopback run")
    parser.add_argument("--connections", type=int, default=8, help="keep-alive connections")
    parser.add_argument(
        "--generator",
        choices=("wrk", "python"),
        default="wrk",
        help="load generator (wrk falls back to python when it cannot be had)",
    )
    parser.add_argument("--plants", type=int, default=1_000_000, help="plants for tail/memory")
    parser.add_argument("--sqlite-plants", type=int, default=100_000)
    parser.add_argument(
        "--profile",
        choices=[case.name for case in inprocess.cases()],
        help="profile this in-process case instead of benchmarking",
    )
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.profile:
        print(profile(args.profile, args.batch * 10))
        return 0
    print_machine()
    valid = True
    if "inprocess" in args.parts:
        valid &= run_inprocess(args)
    if {"loopback", "tail"} & set(args.parts):
        setup = loopback.choose_setup(args.generator)
        if "loopback" in args.parts:
            valid &= run_loopback(setup, args)
        if "tail" in args.parts:
            valid &= run_tail(setup, args)
    if "memory" in args.parts:
        valid &= run_memory(args)
    return 0 if valid else 1


sys.exit(main(sys.argv[1:]))

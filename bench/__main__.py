"""`python -m bench`: measure, side by side with the floor, and print figures against targets.

A run with any wrong answer is reported INVALID (exit status 1): it measured something else.
Targets missed are reported, not fatal: this is a benchmark, not a test.
"""

import argparse
import os
import platform
import subprocess
import sys
import tempfile
from contextlib import ExitStack, closing
from importlib.metadata import version

from bench import counts, durable, inprocess, loopback, memory, pages, postgres, webhooks
from bench.environs import InvalidRun
from bench.load import LoadResult
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
    "tail",
    "memory",
)
#: The parts served by gunicorn over loopback: all but those measured in process.
LOOPBACK_PARTS = set(PARTS) - {"inprocess", "pages", "memory"}
LIBRARIES = ("falcon", "marshmallow", "orjson", "gunicorn")
#: The peer's, printed beside the service's.
PEER_LIBRARIES = ("fastapi", "pydantic", "uvicorn", "uvloop", "httptools")
#: The least share of the floor's creates a second the memory store's may serve over loopback.
MEMORY_OF_FLOOR = 0.85
#: The least share of the memory store's creates a second (its token in `PLANTSTORE_TOKENS`)
#: that it may serve with its token from a tokens file, a digest entry with scopes.
FILE_TOKEN_OF_PLAIN = 0.95


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
    print(
        f"\nin-process (a diagnostic, no target): µs per request, median of {args.rounds} "
        f"rounds of {args.batch}"
    )
    try:
        medians = inprocess.measure(args.rounds, args.batch)
    except InvalidRun as ex:
        print(f"  INVALID: {ex}")
        return False
    floor = medians["floor"]
    print(f"  {'floor':8} {floor:7.1f} µs")
    for name in inprocess.CASES:
        print(f"  {name:8} {medians[name]:7.1f} µs  {medians[name] / floor:4.2f}x floor")
    print(f"  webhooks cost {medians['webhooks'] / medians['success']:4.2f}x success")
    etag, share = medians[inprocess.ETAG], medians[inprocess.ETAG] / medians["get"]
    print(
        f"  the ETag's work in a get (conditions, digest, header) {etag:4.2f} µs,"
        f" {share:4.1%} of get (target ≤ 5%: {verdict(share <= 0.05)})"
    )
    return True


PAGES_NOTE = (
    "  every store holds plants tagged t0 to t99 in turn; deep pages start after random ids;\n"
    f"  a tag's pages come from {pages.TAG_PLANTS:,} plants at least, or they would be short"
)


def run_pages(args) -> bool:
    print(
        f"\npages in process: memory store, µs per GET /plants?limit={pages.LIMIT},"
        f" median of {args.rounds} rounds of {args.page_batch}"
    )
    print(PAGES_NOTE)
    try:
        medians = pages.in_process(args.small_plants, args.plants, args.rounds, args.page_batch)
    except InvalidRun as ex:
        print(f"  INVALID: {ex}")
        return False
    for name, ((small, small_us), (big, big_us)) in medians.items():
        ratio = big_us / small_us
        print(
            f"  {name:16} {small:>9,} plants {small_us:6.1f} µs, {big:,} plants {big_us:6.1f} µs"
            f"  {ratio:4.2f}x  (target ≤ 1.5x: {verdict(ratio <= 1.5)})"
        )
    return True


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
    pinning = (
        f"server on CPU {setup.server_cpu}, {setup.generator} on CPU {setup.load_cpu}"
        if setup.server_cpu is not None
        else f"one CPU: server and {setup.generator} share it"
    )
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


def run_loopback(setup: loopback.Setup, cluster, args) -> bool:
    print("\nover loopback: POST /plants, a fresh id each request; PUT /plants/{id}, a replace:")
    print(
        f"  each PUT renames one of the {len(loopback.WARMED_UP)} plants of the warm-up in turn,"
        " with a name no request sent before (200)"
    )
    print(
        f"  {loopback.PEER}: bench/peer.py, the same creates validated by pydantic, one worker,"
        " its access log on like the service's;"
    )
    print("  " + ", ".join(f"{name} {version(name)}" for name in PEER_LIBRARIES))
    print(
        f"  {loopback.TOKENS_FILE}: the memory store, the token from PLANTSTORE_TOKENS_FILE alone"
        f" (its sha256: digest, name=bench scopes={loopback.TOKEN_SCOPES})"
    )
    print_setup(setup, args)
    postgres_url = cluster and postgres.create_database(cluster, "plants_created")
    references, results = loopback.beside_floor(
        setup,
        postgres_url,
        {"POST": loopback.creates, "PUT": loopback.replaces},
        args.loopback_rounds,
        args.seconds,
        args.connections,
        (loopback.FLOOR, loopback.PEER),
        file_token=True,
    )
    floor, peer = references[loopback.FLOOR], references[loopback.PEER]
    print(describe_runs(loopback.FLOOR, floor))
    print(
        describe_runs(loopback.PEER, peer) + f"  {peer.per_second / floor.per_second:4.0%} of floor"
    )
    for store, figures in results.items():
        posts, puts = figures["POST"], figures["PUT"]
        share = posts.per_second / floor.per_second
        # The targets are the memory store's: a durable store waits for the disk at every create.
        if store == "memory":
            against_peer = posts.per_second / peer.per_second
            target = (
                f"target ≥ {MEMORY_OF_FLOOR:.0%}: {verdict(share >= MEMORY_OF_FLOOR)}),"
                f" {against_peer:4.2f}x {loopback.PEER}'s (target ≥ 1.0x:"
                f" {verdict(against_peer >= 1)}"
            )
        else:
            target = {"sqlite": "durable", "postgresql": "fsync off"}[store]
        print(describe_runs(store, posts) + f"  {share:4.0%} of floor ({target})")
        if store == "memory":
            print(describe_file_token(references[loopback.TOKENS_FILE], posts, floor))
        # A replace costs what a create costs: within a tenth, what runs over loopback move by.
        ratio = puts.per_second / posts.per_second
        print(
            describe_runs(f"{store}, PUT", puts)
            + f"  {puts.per_second / floor.per_second:4.0%} of floor, {ratio:4.2f}x POST's"
            f" (target ≥ 0.9x: {verdict(ratio >= 0.9)})"
        )
    valid = all(f.valid for f in references.values())
    return valid and all(f.valid for both in results.values() for f in both.values())


def describe_file_token(
    file_token: loopback.Figures, memory: loopback.Figures, floor: loopback.Figures
) -> str:
    """The memory store's creates with the token from the tokens file, against its creates with
    the token in `PLANTSTORE_TOKENS`.
    """
    ratio = file_token.per_second / memory.per_second
    return (
        describe_runs(loopback.TOKENS_FILE, file_token)
        + f"  {file_token.per_second / floor.per_second:4.0%} of floor, {ratio:4.2f}x memory's"
        f" (target ≥ {FILE_TOKEN_OF_PLAIN}x: {verdict(ratio >= FILE_TOKEN_OF_PLAIN)})"
    )


def run_loopback_reads(setup: loopback.Setup, cluster, args) -> bool:
    print(
        f"\nreads over loopback: GET /plants/{{id}}, the {len(loopback.WARMED_UP)} plants of the"
        " warm-up in turn (200);"
    )
    print("  304: the same with If-None-Match naming the plant's ETag, as a cache revalidates")
    print_setup(setup, args)
    postgres_url = cluster and postgres.create_database(cluster, "plants_read")
    references, results = loopback.beside_floor(
        setup,
        postgres_url,
        {"GET": lambda _round: loopback.READS, "304": lambda _round: loopback.REVALIDATIONS},
        args.loopback_rounds,
        args.seconds,
        args.connections,
    )
    floor = references[loopback.FLOOR]
    print(describe_runs("floor", floor))
    for store, figures in results.items():
        gets, revalidated = figures["GET"], figures["304"]
        print(
            describe_runs(f"{store}, GET", gets)
            + f"  {gets.per_second / floor.per_second:4.0%} of floor"
        )
        # A 304 answers all a 200 answers but the plant: it may not cost more.
        ratio = revalidated.per_second / gets.per_second
        print(
            describe_runs(f"{store}, 304", revalidated, 304)
            + f"  {revalidated.per_second / floor.per_second:4.0%} of floor, {ratio:4.2f}x GET's"
            f" (target ≥ 1x: {verdict(ratio >= 1)})"
        )
    return floor.valid and all(f.valid for both in results.values() for f in both.values())


def run_durable(setup: loopback.Setup, args) -> bool:
    print("\ndurable stores over loopback, against the memory store in the same rounds")
    print(
        "  POST /plants, a fresh id each request; PUT /plants/{id}, a replace of a plant of the"
        " warm-up;\n  DELETE /plants/{id}, each stored plant once"
    )
    print_setup(setup, args, " and ".join(map(str, durable.CONNECTIONS)))
    directory = tempfile.gettempdir()
    print(
        f"  SQLite with synchronous = FULL (the store's own); files in {directory},"
        f" on {durable.filesystem(directory)}"
    )
    print(
        "  counted a request, over the runs of creates and replaces: the service's CPU (its"
        " workers'), and on PostgreSQL\n  the cluster's CPU, transactions (xact_commit),"
        " statements (pg_stat_statements) and round trips (data segments sent to it)"
    )
    with ExitStack() as stack:
        cluster = start_cluster(stack, setup, durable=True)
        postgres_url = postgres_counts = None
        if cluster is not None:
            settings = postgres.durability(cluster.url())
            print("  PostgreSQL with " + ", ".join(f"{k} = {v}" for k, v in settings.items()))
            if set(settings.values()) != {"on"}:
                print("  INVALID: PostgreSQL's commits would not wait for the disk")
                return False
            postgres_url = postgres.create_database(cluster, durable.DATABASE)
            postgres_counts = stack.enter_context(
                closing(counts.Postgres(cluster, durable.DATABASE))
            )
        try:
            results = durable.measure(
                setup, postgres_url, postgres_counts, args.loopback_rounds, args.seconds
            )
        except InvalidRun as ex:
            print(f"  INVALID: {ex}")
            return False
    valid = True
    for connections, cases in results.items():
        for case, measured in cases.items():
            print(f"  {case}, {connections} connections")
            expected = 204 if case == "deletes" else 200
            memory = measured["memory"]
            for store, store_measured in measured.items():
                line = describe_runs(store, store_measured.figures, expected)
                if case == "replaces":
                    creates = cases["creates"][store].figures
                    ratio = store_measured.figures.per_second / creates.per_second
                    line += (
                        f"  {ratio:4.2f}x POST's"
                        f" (target ≥ {durable.REPLACES_TARGET}x:"
                        f" {verdict(ratio >= durable.REPLACES_TARGET)})"
                    )
                print(line)
                if store != "memory":
                    verdicts = durable_verdicts(connections, case, memory.figures, store_measured)
                    print(f"  {'':18} {verdicts}")
                if store_measured.counts is not None:
                    counted = durable_counts(connections, case, store, memory, store_measured)
                    print(f"  {'':19} {counted}")
                valid &= store_measured.figures.valid
    return valid


def durable_verdicts(
    connections: int, case: str, memory: loopback.Figures, measured: durable.Measured
) -> str:
    """A durable store's share of the memory store's requests/s, its p99 as a multiple of the
    memory store's, each against its target, and its commits a change.
    """
    share = measured.figures.per_second / memory.per_second
    line = f"{share:4.0%} of memory"
    if case == "creates":
        target = durable.CREATES_TARGETS[connections]
        line += f" (target ≥ {target:.0%}: {verdict(share >= target)})"
    tail = measured.figures.p99_us / memory.p99_us
    line += f", p99 {tail:5.1f}x memory's (target ≤ {durable.P99_TARGET}x:"
    line += f" {verdict(tail <= durable.P99_TARGET)}), commits a change "
    commits = measured.commits_per_change
    return line + ("n/a" if commits is None else f"{commits:4.2f}")


def durable_counts(
    connections: int,
    case: str,
    store: str,
    memory: durable.Measured,
    measured: durable.Measured,
) -> str:
    """What a request cost the service, and PostgreSQL, counted; against their targets, which
    are those of a create at the most connections.
    """
    targeted = case == "creates" and connections == max(durable.CONNECTIONS)
    counted = measured.counts
    line = f"a request: service CPU {counted.service_us():5.0f} µs"
    if store != "memory":
        ratio = counted.service_us() / memory.counts.service_us()
        line += f", {ratio:4.2f}x memory's"
        if targeted:
            target = durable.SERVICE_CPU_TARGET
            line += f" (target ≤ {target}x: {verdict(ratio <= target)})"
    if store != "postgresql":
        return line
    transactions, round_trips = counted.transactions_each(), counted.round_trips_each()
    line += f"; PostgreSQL CPU {counted.postgres_us():4.0f} µs, {transactions:4.2f} transactions"
    if targeted:
        target = durable.TRANSACTIONS_TARGET
        line += f" (target ≤ {target}: {verdict(transactions <= target)})"
    line += f", {counted.statements_each():4.2f} statements, {round_trips:4.2f} round trips"
    if targeted:
        target = durable.ROUND_TRIPS_TARGET
        line += f" (target ≤ {target}: {verdict(round_trips <= target)})"
    if counted.closed:
        line += f" ({counted.closed} connections closed in the runs: their trips not counted)"
    return line


def run_loopback_webhooks(setup: loopback.Setup, args) -> bool:
    print("\nover loopback with webhooks: POST /plants, to a subscriber that never answers")
    print_setup(setup, args)
    results = webhooks.cost(setup, args.loopback_rounds, args.seconds, args.connections)
    floor = results.pop("floor")
    print(describe_runs("floor", floor))
    for store in webhooks.STORES:
        plain, subscribed = results[store], results[f"{store}, webhooks"]
        share = subscribed.per_second / floor.per_second
        print(
            describe_runs(store, plain) + f"  {plain.per_second / floor.per_second:4.0%} of floor"
        )
        line = describe_runs(f"{store}, webhooks", subscribed) + f"  {share:4.0%} of floor"
        line += f", {subscribed.per_second / plain.per_second:4.0%} of {store}"
        if store == "memory":
            line += f" (target ≥ 85% of floor: {verdict(share >= 0.85)})"
        print(line)
    return all(figures.valid for figures in [floor, *results.values()])


def run_delivery(setup: loopback.Setup, args) -> bool:
    print("\nwebhook delivery: commit to receipt, to a subscriber answering 200 at once")
    print(
        f"  POST /plants at {args.delivery_rate} req/s (the python generator) for {args.seconds} s,"
        f" then at full speed ({setup.generator}) for {args.seconds} s;"
    )
    print(
        f"  gunicorn -c gunicorn.conf.py; server on CPU {setup.server_cpu}, load and subscriber"
        f" on CPU {setup.load_cpu}; {args.connections} connections; one run each"
    )
    results = webhooks.delivery(setup, args.delivery_rate, args.seconds, args.connections)
    for store, delivery in results.items():
        p50, p99 = webhooks.percentiles(delivery.delays)
        paced, full = delivery.paced, delivery.full_speed
        print(
            f"  {store:8} {paced.per_second:5.0f} req/s: delay p50 {p50:6.1f} ms  p99 {p99:7.1f} ms"
            f"  ({len(delivery.delays)} of {paced.requests} events arrived)" + invalid_note(paced)
        )
        print(
            f"  {'':8} {full.per_second:5.0f} req/s: {delivery.delivered_per_second:5.0f} events/s"
            " delivered meanwhile" + invalid_note(full)
        )
    return all(delivery.valid for delivery in results.values())


def run_loopback_pages(setup: loopback.Setup, cluster, args) -> bool:
    print(f"\npages over loopback: GET /plants?limit={pages.LIMIT}, cost against the store's size")
    print(PAGES_NOTE)
    print_setup(setup, args)
    try:
        results = pages.over_loopback(
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
        return False
    valid = True
    for (store, case), ((small, small_figures), (big, big_figures)) in results.items():
        # A page's cost is the time the server spends on it: requests/s, inverted.
        ratio = small_figures.per_second / big_figures.per_second
        print(f"  {store}, {case}")
        print(describe_runs(f"  {small:,} plants", small_figures))
        print(
            describe_runs(f"  {big:,} plants", big_figures)
            + f"  cost {ratio:4.2f}x (target ≤ 1.5x: {verdict(ratio <= 1.5)})"
        )
        valid &= small_figures.valid and big_figures.valid
    return valid


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
    print(
        "\nmemory: bytes per stored plant, created through the app (plant-123456, one of 100 tags)"
    )
    per_plant = memory.memory_store_bytes_per_plant(args.plants)
    print(
        f"  memory store, RSS growth over {args.plants:,} plants: {per_plant:6.0f} B"
        f"  (target ≤ 250: {verdict(per_plant <= 250)})"
    )
    per_plant = memory.sqlite_bytes_per_plant(args.sqlite_plants)
    print(f"  SQLite files over {args.sqlite_plants:,} plants: {per_plant:6.0f} B")
    return True


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
        " throughput), loopback-pages, tail, memory",
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
        "--plants", type=int, default=1_000_000, help="plants for tail, memory, the big pages"
    )
    parser.add_argument(
        "--small-plants", type=int, default=1_000, help="plants of the small store of pages"
    )
    parser.add_argument("--sqlite-plants", type=int, default=100_000)
    parser.add_argument(
        "--profile",
        choices=["floor", *inprocess.CASES],
        help="profile this in-process case instead of benchmarking",
    )
    return parser


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
            if {"loopback", "loopback-reads", "loopback-pages"} & set(args.parts):
                cluster = start_cluster(stack, setup)
            if "loopback" in args.parts:
                valid &= run_loopback(setup, cluster, args)
            if "loopback-reads" in args.parts:
                valid &= run_loopback_reads(setup, cluster, args)
            if "durable" in args.parts:
                valid &= run_durable(setup, args)
            if "loopback-webhooks" in args.parts:
                valid &= run_loopback_webhooks(setup, args)
            if "delivery" in args.parts:
                valid &= run_delivery(setup, args)
            if "loopback-pages" in args.parts:
                valid &= run_loopback_pages(setup, cluster, args)
        if "tail" in args.parts:
            valid &= run_tail(setup, args)
    if "memory" in args.parts:
        valid &= run_memory(args)
    return 0 if valid else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

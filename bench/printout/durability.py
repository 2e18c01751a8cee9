"""What a change costs on the durable stores: the part `durable`, each store against the
memory store, with what a request cost the service and PostgreSQL, counted.
"""

import tempfile
from contextlib import ExitStack, closing

from bench import counts, durable, loopback, postgres
from bench.environs import InvalidRun
from bench.printout.lines import describe_runs, print_setup, start_cluster, verdict


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

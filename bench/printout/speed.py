"""How much of Falcon's speed the service keeps: the parts `inprocess`, `loopback` and
`loopback-reads`, each against the floor, and over loopback against the peer.
"""

from importlib.metadata import version

from bench import inprocess, loopback, postgres
from bench.environs import InvalidRun
from bench.printout.lines import describe_runs, print_setup, verdict

#: The peer's, printed beside the service's.
PEER_LIBRARIES = ("fastapi", "pydantic", "uvicorn", "uvloop", "httptools")
#: The least share of the floor's creates a second the memory store's may serve over loopback.
MEMORY_OF_FLOOR = 0.85
#: The most the memory store's p99 of creates may be, as a multiple of the peer's.
MEMORY_P99_OF_PEER = 1.5
#: The least share of the memory store's creates a second (its token in `PLANTSTORE_TOKENS`)
#: that it may serve with its token from a tokens file, a digest entry with scopes.
FILE_TOKEN_OF_PLAIN = 0.95


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
            tail = posts.p99_us / peer.p99_us
            target = (
                f"target ≥ {MEMORY_OF_FLOOR:.0%}: {verdict(share >= MEMORY_OF_FLOOR)}),"
                f" {against_peer:4.2f}x {loopback.PEER}'s (target ≥ 1.0x:"
                f" {verdict(against_peer >= 1)}), p99 {tail:3.1f}x its (target ≤"
                f" {MEMORY_P99_OF_PEER}x: {verdict(tail <= MEMORY_P99_OF_PEER)}"
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

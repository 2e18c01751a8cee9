"""Whether costs stay put as a store grows: the parts `pages` and `loopback-pages` (a page
from a small store against one from a big one), `tail` (the p99 of a full store against an
empty one) and `memory` (bytes a plant).
"""

from bench import loopback, memory, pages
from bench.environs import InvalidRun
from bench.printout.lines import describe_runs, print_setup, sized_over_loopback, verdict

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


def run_loopback_pages(setup: loopback.Setup, cluster, args) -> bool:
    print(f"\npages over loopback: GET /plants?limit={pages.LIMIT}, cost against the store's size")
    print(PAGES_NOTE)
    print_setup(setup, args)
    results = sized_over_loopback(pages.over_loopback, setup, cluster, args)
    if results is None:
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

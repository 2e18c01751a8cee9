"""The part `feed`: a page of events against a page of plants on the same server, and from a
small feed against a big one, on every store.
"""

from bench import feed, loopback
from bench.printout.lines import describe_runs, print_setup, sized_over_loopback, verdict

FEED_NOTE = (
    "  every store holds plants 0 to N - 1 and the feed of their creation, in id order;\n"
    "  deep pages start after random ids and positions that leave a full page"
)


def run_feed(setup: loopback.Setup, cluster, args) -> bool:
    print(
        f"\nfeed over loopback: GET /events?limit={feed.LIMIT} beside GET /plants?limit="
        f"{feed.LIMIT}, and its cost against the feed's size"
    )
    print(FEED_NOTE)
    print_setup(setup, args)
    results = sized_over_loopback(feed.over_loopback, setup, cluster, args)
    if results is None:
        return False
    valid = True
    for (store, case), (small, big) in results.items():
        print(f"  {store}, {case}")
        for server in (small, big):
            # A page's cost is the time the server spends on it: requests/s, inverted.
            ratio = server.plants.per_second / server.events.per_second
            passed = verdict(ratio <= feed.PLANTS_TARGET)
            print(describe_runs(f"  {server.size:,} plants", server.plants))
            print(
                describe_runs(f"  {server.size:,} events", server.events)
                + f"  cost {ratio:4.2f}x plants' (target ≤ {feed.PLANTS_TARGET}x: {passed})"
            )
            valid &= server.plants.valid and server.events.valid
        growth = small.events.per_second / big.events.per_second
        print(
            f"    {big.size:,} events against {small.size:,}: cost {growth:4.2f}x"
            f" (target ≤ {feed.GROWTH_TARGET}x: {verdict(growth <= feed.GROWTH_TARGET)})"
        )
    return valid

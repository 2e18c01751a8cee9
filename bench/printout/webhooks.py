"""What webhooks cost and how soon their events arrive: the parts `loopback-webhooks` (creates
with a subscriber that never answers, against the floor) and `delivery`.
"""

from bench import loopback, webhooks
from bench.printout.lines import describe_runs, invalid_note, print_setup, verdict


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

"""Webhooks configured: what they cost a create, and how soon their events arrive.

The subscribers are the tests' (plantstore/testing/webhook_receiver.py), on loopback. For the
cost, one that takes every delivery and never answers it: each attempt waits out its timeout
while the outbox only grows, the worst a subscriber can do to the requests. For the delay, one
that answers 200 and notes when each event arrived.
"""

import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

from bench.load import LoadResult, python_load
from bench.loopback import (
    CREATES_BEFORE,
    Figures,
    Load,
    Served,
    Setup,
    compare,
    creates,
    pinned,
    stores,
)
from bench.server import Server, server_environ
from plantstore.testing.webhook_receiver import SECRET, WebhookReceiver

#: The stores whose deliveries are measured: the one that keeps its outbox in the process,
#: and the durable one that needs no server of its own.
STORES = ("memory", "sqlite")
#: Seconds to wait for the last events of a run at a fixed rate, which should come at once.
ARRIVAL_SECONDS = 60
#: Creates that warm a server up before its delays are measured; their events are waited for.
WARM_UP = 200


def subscription(url: str) -> dict[str, str]:
    """The environment that sends every event to `url`."""
    return {"PLANTSTORE_WEBHOOK_URLS": url, "PLANTSTORE_WEBHOOK_SECRET": SECRET}


@contextmanager
def subscriber(cpu: int | None, answering: bool) -> Iterator[WebhookReceiver]:
    """A subscriber whose threads run on `cpu`; one not `answering` holds every delivery.

    Its threads are started while this one is pinned, and every thread it starts later
    inherits their CPU: it shares the load generator's, not the server's.
    """
    with pinned(cpu):
        receiver = WebhookReceiver()
    with receiver:
        if not answering:
            receiver.hold()
        yield receiver


def cost(setup: Setup, rounds: int, seconds: int, connections: int) -> dict[str, Figures]:
    """The floor, and each of `STORES` served without webhooks and with a silent subscriber.

    Each server has a file of its own: the outbox of one does not weigh on the other.
    """
    with (
        subscriber(setup.load_cpu, answering=False) as silent,
        tempfile.TemporaryDirectory() as plain,
        tempfile.TemporaryDirectory() as subscribed,
    ):
        servers = {"floor": Served(args=("bench.floor:app",))}
        environs = stores(subscribed, None)
        for store, environ in stores(plain, None).items():
            servers[store] = Served(environ)
            servers[f"{store}, webhooks"] = Served({**environs[store], **subscription(silent.url)})
        loads = {name: Load(name, creates) for name in servers}
        return compare(setup, servers, loads, rounds, seconds, connections)


@dataclass(frozen=True)
class DeliveryFigures:
    """One store's deliveries: the delays at a fixed rate, and what arrives at full speed."""

    paced: LoadResult
    delays: list[float]
    """Seconds from each event's commit to its receipt, of the events of the paced run that
    arrived, each once, in order."""
    full_speed: LoadResult
    delivered_per_second: float
    """Events that arrived while the full-speed run lasted, a second."""

    @property
    def valid(self) -> bool:
        return self.paced.valid and self.full_speed.valid


def delivery(
    setup: Setup, rate: float, seconds: int, connections: int
) -> dict[str, DeliveryFigures]:
    """For each of `STORES`, the delays from commit to receipt, then delivery at full speed.

    First creates at `rate` a second for `seconds` (the Python generator: wrk cannot hold a
    rate), and every event they made is waited for; then creates as fast as the server takes
    them, for `seconds`, while the backlog of events grows: what arrives meanwhile is what
    delivery can do under the heaviest load.
    """
    with tempfile.TemporaryDirectory() as tmp:
        return {
            store: _delivery(setup, environ, rate, seconds, connections)
            for store, environ in stores(tmp, None).items()
        }


def _delivery(
    setup: Setup, environ: dict[str, str], rate: float, seconds: int, connections: int
) -> DeliveryFigures:
    with (
        subscriber(setup.load_cpu, answering=True) as receiver,
        Server(setup.server_cpu, server_environ(**environ, **subscription(receiver.url))) as server,
    ):
        server.warm_up(CREATES_BEFORE, WARM_UP)
        paced_ids = creates(0)
        with pinned(setup.load_cpu):
            paced = python_load(server.port, paced_ids, seconds, connections, rate)
        receiver.wait_for(lambda got: len(got) >= WARM_UP + paced.requests, ARRIVAL_SECONDS)
        delays = commit_to_receipt(receiver, paced_ids.first_id)
        start = time.time()
        with pinned(setup.load_cpu):
            full_speed = setup.load(server.port, creates(1), seconds, connections)
        end = time.time()
    during = sum(start <= delivery.received <= end for delivery in list(receiver.deliveries))
    return DeliveryFigures(paced, delays, full_speed, during / (end - start))


def commit_to_receipt(receiver: WebhookReceiver, first_id: int) -> list[float]:
    """The seconds from the commit of each event of a plant from `first_id` on to its receipt.

    An event's `timestamp` is taken in the transaction that commits it; a repeat of a delivery
    (at least once) counts its first receipt.
    """
    first: dict[str, float] = {}
    for delivery in list(receiver.deliveries):
        if delivery.event["data"]["id"] >= first_id and delivery.webhook_id not in first:
            committed = datetime.fromisoformat(delivery.event["timestamp"]).timestamp()
            first[delivery.webhook_id] = delivery.received - committed
    return sorted(first.values())


def percentiles(delays: list[float]) -> tuple[float, float]:
    """p50 and p99 of `delays`, in ms."""
    cuts = statistics.quantiles(delays, n=100) if len(delays) > 1 else [0] * 99
    return cuts[49] * 1000, cuts[98] * 1000

"""The app factory: config → store → resources → middleware → routes."""

import atexit
import threading

import falcon
import orjson
from marshmallow import ValidationError
from standardwebhooks import Webhook

from plantstore.api.auth import BearerAuth, Tokens
from plantstore.api.cors import Cors
from plantstore.api.docs import add_docs
from plantstore.api.errors import handle_store_unavailable, handle_validation_error, serialize_error
from plantstore.api.middleware import BodyLimit, RequestId
from plantstore.api.openapi import OpenApiDocument
from plantstore.api.plants import Plant, Plants
from plantstore.api.routing import Router
from plantstore.config import Config
from plantstore.operations.health import Health, Readiness
from plantstore.operations.logs import Request
from plantstore.operations.metrics import Metrics, MetricsEndpoint
from plantstore.serving.proxy import ForwardedClient
from plantstore.stores import PlantStore, StoreUnavailable, open_store, store_kind
from plantstore.stores.gate import GatedStore
from plantstore.webhooks.deliverer import Deliverer


def create_app(config: Config | None = None, store: PlantStore | None = None) -> falcon.App:
    """Build the WSGI app; gunicorn calls this once in each worker.

    A store it opens itself it also closes, when the process exits. gunicorn does not preload
    the app, so this runs in each worker after the fork and every worker has connections of
    its own: keep it so.

    With webhook URLs configured, it starts this worker's `Deliverer` and stops it at exit
    (a graceful one: gunicorn's worker exits through `sys.exit`), before the store closes.
    The store must then be an `Outbox` too: the one it opens is, woken by each commit.

    A shared store it opens is used by requests through a `GatedStore`, which keeps one of
    gunicorn's threads out of it; the memory store never waits, so it needs none.
    """
    config = config or Config.from_env()
    committed = threading.Event()
    served = store
    if store is None:
        store = open_store(config.store_url, config.webhook_urls, committed.set)
        atexit.register(store.close)
        served = store if config.memory else GatedStore(store, max(config.threads - 1, 1))

    outbox = store if config.webhook_urls else None
    metrics = Metrics(served, store_kind(config.store_url), outbox)
    if outbox is not None:
        deliverer = Deliverer(
            outbox,
            config.webhook_urls,
            committed,
            Webhook(config.webhook_secret),
            metrics,
            config.webhook_timeout,
            config.webhook_give_up_after,
        )
        deliverer.start()
        atexit.register(deliverer.stop)
    # CORS, when on, comes next to the metrics, which only read the answer: Falcon runs
    # `process_response` in the reverse order of this list and (independent middleware, its
    # default) for every request, even one a middleware answered itself. So CORS is the last to
    # change an answer, whoever wrote it (a responder, an error handler, BearerAuth's 401,
    # BodyLimit's 413), and sees what the others added to it.
    cors = [Cors(config.cors_origins)] if config.cors_origins else []
    app = falcon.App(
        request_type=Request,
        middleware=[
            metrics.request_metrics,
            *cors,
            ForwardedClient(config.forwarded_allow_ips),
            RequestId(),
            BearerAuth(Tokens(config.tokens, config.tokens_file)),
            BodyLimit(config.max_body_bytes),
        ],
        router=Router(),
    )
    # Only JSON is accepted (anything else is 415, as plantstore/media.py decides), read and
    # written by orjson: fast, and it turns deep nesting, NaN and invalid UTF-8 into a 400
    # where the stdlib would not.
    json = falcon.media.JSONHandler(dumps=orjson.dumps, loads=orjson.loads)
    app.req_options.media_handlers = falcon.media.Handlers({falcon.MEDIA_JSON: json})
    app.resp_options.media_handlers = falcon.media.Handlers({falcon.MEDIA_JSON: json})
    app.set_error_serializer(serialize_error)
    app.add_error_handler(ValidationError, handle_validation_error)
    app.add_error_handler(StoreUnavailable, handle_store_unavailable)

    app.add_route("/plants", Plants(served))
    app.add_route("/plants/{plant_id}", Plant(served))
    app.add_route("/healthz", Health())
    app.add_route("/readyz", Readiness(served))
    app.add_route("/openapi.json", OpenApiDocument())
    app.add_route("/metrics", MetricsEndpoint(metrics, public=config.metrics_public))
    add_docs(app)
    return app

"""The app factory: config and store → resources → middleware → routes."""

import falcon
import orjson
from marshmallow import ValidationError

from plantstore.api.auth import BearerAuth
from plantstore.api.cors import Cors
from plantstore.api.docs import add_docs
from plantstore.api.errors import (
    handle_cursor_gone,
    handle_store_unavailable,
    handle_validation_error,
    serialize_error,
)
from plantstore.api.events import Events
from plantstore.api.middleware import BodyLimit
from plantstore.api.openapi.document import OpenApiDocument
from plantstore.api.plants import Plant, Plants
from plantstore.api.routing import Router
from plantstore.config import Config, store_kind
from plantstore.core.stores import CursorGone, PlantStore, StoreUnavailable
from plantstore.operations.health import Health, Readiness, ReadinessCheck
from plantstore.operations.metrics import MetricsEndpoint, RequestMetrics, process_metrics
from plantstore.operations.request import Request
from plantstore.operations.request_log import RequestLog, TrustedProxies
from plantstore.tokens.accepted import Tokens


def create_app(config: Config, store: PlantStore) -> falcon.App:
    """Build the WSGI app serving `store`; it starts nothing, and closes nothing.

    Whoever opened the store owns it: under gunicorn, each worker's `plantstore.runtime.Runtime`.
    The metrics are the process's (`process_metrics`), which the runtime counts in too.
    """
    metrics = process_metrics()
    readiness = ReadinessCheck(store)
    # CORS, when on, comes next to the metrics, which only read the answer: Falcon runs
    # `process_response` in the reverse order of this list and (independent middleware, its
    # default) for every request, even one a middleware answered itself. So CORS is the last to
    # change an answer, whoever wrote it (a responder, an error handler, a 401, a 413), and sees
    # what the others added to it.
    cors = [Cors(config.cors_origins)] if config.cors_origins else []
    app = falcon.App(
        request_type=Request,
        middleware=[
            RequestMetrics(metrics),
            *cors,
            RequestLog(TrustedProxies.parse(config.forwarded_allow_ips)),
            BearerAuth(Tokens(config.tokens, config.tokens_file, kept_in=config.tokens_kept_in)),
            BodyLimit(config.max_body_bytes),
        ],
        router=Router(),
    )
    # Only JSON is accepted (anything else is 415, as plantstore/api/media.py decides), read and
    # written by orjson, which turns deep nesting, NaN and invalid UTF-8 into a 400 where the
    # stdlib would not.
    json = falcon.media.JSONHandler(dumps=orjson.dumps, loads=orjson.loads)
    app.req_options.media_handlers = falcon.media.Handlers({falcon.MEDIA_JSON: json})
    app.resp_options.media_handlers = falcon.media.Handlers({falcon.MEDIA_JSON: json})
    app.set_error_serializer(serialize_error)
    app.add_error_handler(ValidationError, handle_validation_error)
    app.add_error_handler(StoreUnavailable, handle_store_unavailable)
    app.add_error_handler(CursorGone, handle_cursor_gone)

    routes = {
        "/plants": Plants(store),
        "/plants/{plant_id}": Plant(store),
        "/events": Events(store, config.feed_waits, metrics.feed_waiting),
        "/healthz": Health(),
        "/readyz": Readiness(readiness),
        "/metrics": MetricsEndpoint(
            metrics,
            readiness,
            store,
            store_kind=store_kind(config.store_url),
            webhooks=bool(config.webhook_urls),
            public=config.metrics_public,
        ),
    }
    for template, resource in routes.items():
        app.add_route(template, resource)
    # Each resource describes itself beside its responders; the document gathers them here,
    # where the parts meet, so that the API needs to import none of the parts above it.
    app.add_route("/openapi.json", OpenApiDocument(routes.values()))
    add_docs(app)
    return app

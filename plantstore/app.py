"""The app factory: config → store → resources → middleware → routes."""

import falcon
import orjson
from marshmallow import ValidationError

from plantstore.auth import BearerAuth
from plantstore.config import Config
from plantstore.errors import handle_validation_error, serialize_error
from plantstore.middleware import BodyLimit, RequestId
from plantstore.openapi import OpenApiDocument
from plantstore.proxy import ForwardedClient
from plantstore.resources import Health, Plants
from plantstore.stores import PlantStore
from plantstore.stores.memory import MemoryStore


def create_app(config: Config | None = None, store: PlantStore | None = None) -> falcon.App:
    """Build the WSGI app; gunicorn calls this once in each worker."""
    config = config or Config.from_env()
    store = store if store is not None else MemoryStore()

    app = falcon.App(
        middleware=[
            ForwardedClient(config.forwarded_allow_ips),
            RequestId(),
            BearerAuth(config.tokens),
            BodyLimit(config.max_body_bytes),
        ]
    )
    # Only JSON is accepted (anything else is 415), read and written by orjson: fast, and it
    # turns deep nesting, NaN and invalid UTF-8 into a 400 where the stdlib would not.
    json = falcon.media.JSONHandler(dumps=orjson.dumps, loads=orjson.loads)
    app.req_options.media_handlers = falcon.media.Handlers({falcon.MEDIA_JSON: json})
    app.resp_options.media_handlers = falcon.media.Handlers({falcon.MEDIA_JSON: json})
    app.set_error_serializer(serialize_error)
    app.add_error_handler(ValidationError, handle_validation_error)

    app.add_route("/plants", Plants(store))
    app.add_route("/healthz", Health())
    app.add_route("/openapi.json", OpenApiDocument())
    return app

"""Falcon's router, with an `OPTIONS` answer that is what it says: `204 No Content` and `Allow`;
and the paths an answer names, where the service is mounted."""

from urllib.parse import quote, urlencode

import falcon
from falcon.routing import CompiledRouter


class Router(CompiledRouter):
    """Give every route that has no `on_options` of its own an `OPTIONS` answer of 204.

    Falcon's default one answers 200 with an empty body, which the app then types as JSON
    though it holds none; a 204 carries neither a body nor a type. `Allow` lists what a 405 on
    the same path lists, `OPTIONS` included. It takes the place of Falcon's default responder
    and does its job, so `falcon.CORSMiddleware` answers a preflight through it as through
    Falcon's: it turns `Allow` into `Access-Control-Allow-Methods`.
    """

    def map_http_methods(self, resource, **kwargs):
        method_map = super().map_http_methods(resource, **kwargs)
        if "OPTIONS" not in method_map:
            method_map["OPTIONS"] = options_responder(", ".join(sorted({*method_map, "OPTIONS"})))
        return method_map


def options_responder(allowed: str):
    """An `OPTIONS` responder answering 204 with `Allow: allowed`."""

    def on_options(req, resp, **kwargs):
        resp.status = falcon.HTTP_204
        resp.set_header("Allow", allowed)

    return on_options


def mounted(req: falcon.Request, path: str) -> str:
    """The service's `path` where the service is mounted, quoted.

    With one leading slash: a client resolves `//plants`, which `GET //plants` would give, as a
    URL of the host `plants`.
    """
    return quote("/" + (req.root_path + path).lstrip("/"))


def next_page(req: falcon.Request, query: dict[str, object]) -> str:
    """The `Link` to the next page (RFC 8288): this path with `query`, the target quoted, as
    GitHub writes it and as many clients' parsers expect."""
    return f'<{mounted(req, req.path)}?{urlencode(query, quote_via=quote)}>; rel="next"'

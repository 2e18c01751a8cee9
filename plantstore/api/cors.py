"""Browser pages on other origins calling the service (CORS), through Falcon's own middleware."""

from collections.abc import Iterable

import falcon

#: Request headers a page may send beyond the safelisted ones: its token, the body's type, its
#: own request id to find its requests in the log by, and the conditions of a change or a read.
ALLOW_HEADERS = "Authorization, Content-Type, X-Request-ID, If-Match, If-None-Match"

#: Answer headers a page may read beyond the safelisted ones: the next page of a list, the
#: request id to quote, when to try again after a 503, a plant's validator, and where a plant
#: made by `PUT` is.
EXPOSE_HEADERS = ("Link", "X-Request-ID", "Retry-After", "ETag", "Location")


class Cors(falcon.CORSMiddleware):
    """`falcon.CORSMiddleware` for `origins`, never with credentials, and two things it leaves out.

    Credentials (cookies, `Access-Control-Allow-Credentials`) are never allowed: the service
    reads none, a page's script sets `Authorization` itself. So even `*`, any origin, lets a
    page in only with a token it already holds; there is nothing a browser would add for it.

    Every answer says `Vary: Origin`, whether the request had an `Origin` or not: what CORS
    headers an answer carries depends on it, and a cache (the browser's, a proxy's) must not
    give one origin's answer to another. And a preflight allows the fixed list of headers this
    API reads, where Falcon's would allow whatever the preflight asked for.
    """

    def __init__(self, origins: Iterable[str]) -> None:
        origins = tuple(origins)
        super().__init__(
            allow_origins="*" if origins == ("*",) else origins, expose_headers=EXPOSE_HEADERS
        )

    def process_response(self, req, resp, resource, req_succeeded):
        super().process_response(req, resp, resource, req_succeeded)
        resp.append_header("Vary", "Origin")
        if resp.get_header("Access-Control-Allow-Headers") is not None:
            resp.set_header("Access-Control-Allow-Headers", ALLOW_HEADERS)

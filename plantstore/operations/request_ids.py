"""A request id on every answer and every log line of its request."""

import random
import re

from plantstore.operations.logs import ROUTE_KEY, current_request_id

#: An incoming X-Request-ID is echoed only when it is this tame: safe in a header and a log line.
_SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9._:@-]{1,128}")


def request_id(sent: str | None) -> str:
    """The id of a request: the client's own `X-Request-ID` when sane, else 128 fresh bits.

    The id must be unique, not secret: `random` (which Python reseeds in every forked worker)
    makes it without the system call that `uuid4`'s `os.urandom` is at every request.
    """
    if sent is not None and _SANE_REQUEST_ID.fullmatch(sent):
        return sent
    return random.randbytes(16).hex()


class RequestId:
    """Give every answer an `X-Request-ID`, as `request_id` makes it, and tell the log its route.

    gunicorn's access log reads the id back from the answer (`%({x-request-id}o)s`), and the
    error log from `current_request_id`, for the lines logged while the request is served.
    """

    def process_request(self, req, resp):
        rid = request_id(req.get_header("X-Request-ID"))
        resp.set_header("X-Request-ID", rid)
        current_request_id.set(rid)

    def process_resource(self, req, resp, resource, params):
        # For the JSON access log's `route`, which gunicorn reads from the environ.
        req.env[ROUTE_KEY] = req.uri_template

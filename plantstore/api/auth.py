"""Bearer-token authentication (RFC 6750), and the scope each operation asks of a token."""

import logging
import re

import falcon

from plantstore.config import TOKEN_PATTERN
from plantstore.tokens.accepted import Tokens

REALM = "plantstore"
#: The WSGI environ's key under which the name of the request's token is left, for the access
#: log (gunicorn's `{key}e` atom): the client's name, never its token.
TOKEN_KEY = "plantstore.token"
#: The one form of a bearer credential: `Bearer` in any case, one or more spaces, the token.
#: The nginx site keys each token's rate with this same expression (deploy/nginx.conf's `map`),
#: so no other spelling of a token is let in under a rate of its own. Spaces and tabs around it
#: are no part of the field's value (RFC 9110 §5.5), but nginx 1.22 keeps tabs there: matched
#: here too, the two agree. ASCII, else a case-insensitive class takes the Kelvin sign for `k`.
BEARER = re.compile(
    rf"[ \t]*Bearer +(?P<bearer_token>{TOKEN_PATTERN})[ \t]*", re.ASCII | re.IGNORECASE
)

_log = logging.getLogger(__name__)


class BearerAuth:
    """Let a request reach its resource only with `Authorization: Bearer <accepted token>`, one
    that has the scope its operation asks for (RFC 6750 §3.1).

    It runs in `process_resource`, before any responder reads the body, and only where a route
    matched; a resource opts out with a class attribute `auth_required = False`. `OPTIONS`
    needs no token: it tells only which methods a path has, and a browser's CORS preflight
    never carries credentials. The scope an operation asks for is its `Operation`'s, which the
    OpenAPI document shows (plantstore/api/openapi/operation.py). Tokens are never put into an
    error message or a log line: the logs name a token by its name.
    """

    def __init__(self, tokens: Tokens) -> None:
        self._tokens = tokens

    def process_resource(self, req, resp, resource, params):
        if req.method == "OPTIONS" or not getattr(resource, "auth_required", True):
            return
        if req.auth is None:
            raise _unauthorized("Send the header 'Authorization: Bearer <token>'.")
        credential = BEARER.fullmatch(req.auth)
        if credential is None:
            raise _unauthorized("The Authorization header must read 'Bearer <token>'.")
        entry = self._tokens.find(credential["bearer_token"].encode())
        if entry is None:
            raise _unauthorized("The bearer token is not accepted.", error="invalid_token")
        req.env[TOKEN_KEY] = entry.name
        scope = scope_of(resource, req.method)
        if scope is not None and scope not in entry.scopes:
            _log.info(
                "plantstore: token=%s may not %s %s: it lacks the scope %s",
                entry.name,
                req.method,
                req.uri_template,
                scope,
            )
            raise _forbidden(scope)


def scope_of(resource: object, method: str) -> str | None:
    """The scope a token needs to call `method` of `resource`, as its `Operation` says; None
    for a method the resource does not have (Falcon answers 405) or one that needs none."""
    responder = getattr(resource, f"on_{method.lower()}", None)
    return getattr(getattr(responder, "openapi", None), "scope", None)


def _unauthorized(description: str, error: str | None = None) -> falcon.HTTPUnauthorized:
    """A 401 with its `WWW-Authenticate` challenge; the app's error serializer writes the body."""
    challenge = f'Bearer realm="{REALM}"'
    if error:
        challenge += f', error="{error}"'
    return falcon.HTTPUnauthorized(
        title="Unauthorized", description=description, challenges=[challenge]
    )


def _forbidden(scope: str) -> falcon.HTTPForbidden:
    """A 403 naming the scope the token lacks, in the body and in `WWW-Authenticate`."""
    return falcon.HTTPForbidden(
        title="Forbidden",
        description=f"The bearer token is accepted, but not for this: it needs the scope {scope}.",
        headers={
            "WWW-Authenticate": (
                f'Bearer realm="{REALM}", error="insufficient_scope", scope="{scope}"'
            )
        },
    )

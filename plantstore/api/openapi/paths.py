"""Each resource's operations, written from what its responders say of themselves.

A responder's `Operation` names what is its own: its answers, and the failures only its logic
gives (a 404, a 409). The others follow from what it takes and where it is served, since the
code that answers them (a schema's 400, `require_json`'s 415, `BearerAuth`'s 401) runs for
every such request: they are derived here rather than listed by hand beside each responder,
where one could be forgotten. tests/api/test_openapi_statuses.py holds the two to each other.
"""

from copy import deepcopy

import falcon

from plantstore.api.openapi.components import CONDITIONS, error_name
from plantstore.api.openapi.operation import Operation

#: What any request may get: nginx (or gunicorn, run alone) refuses a request line or headers
#: over its limits before the app sees them, and a bug is a bug.
ANY = (414, 431, 500)


def path_operations(resource: object) -> dict:
    """The operations of `resource`, by method; a `GET` that is also the `HEAD` makes both.

    Raises:
        TypeError: a responder says nothing of itself, which the document would leave out.
    """
    responders = falcon.routing.map_http_methods(resource)
    operations = {}
    for method, responder in responders.items():
        described = getattr(responder, "openapi", None)
        if not isinstance(described, Operation):
            raise TypeError(f"{type(resource).__name__}.on_{method.lower()} has no Operation")
        written = _written(described, resource)
        if method == "HEAD" and responder == responders.get("GET"):
            written = _headers_only(written)
        operations[method.lower()] = written
    return operations


def _written(described: Operation, resource: object) -> dict:
    """The operation as the document writes it, with every failing status it may answer."""
    # As `plantstore.api.auth.BearerAuth` decides, for the resource as the app serves it.
    behind_token = getattr(resource, "auth_required", True)
    failing = {*ANY, *described.errors}
    if described.parameters or described.conditional or described.body:
        failing.add(400)  # a schema reads each, or the conditions' grammar: either words a 400
    if described.conditional:
        failing.add(412)
    if described.body:
        # `BodyLimit` refuses any body over the limit, and `require_json` one that is not JSON;
        # only an operation that takes a body says so to clients.
        failing.update((413, 415))
    if behind_token:
        failing.add(401)
        if described.scope:
            failing.add(403)
    if resource.openapi.needs_store:
        failing.add(503)
    written = {"summary": described.summary, "operationId": described.operation_id}
    if described.description:
        written["description"] = described.description
    if not behind_token:
        written["security"] = []
    elif described.scope:
        written["security"] = [{"bearerAuth": [described.scope]}]
    parameters = [*described.parameters, *(CONDITIONS if described.conditional else ())]
    if parameters:
        # apispec expands parameters in place: each operation needs its own.
        written["parameters"] = deepcopy(parameters)
    if described.body:
        json = {"application/json": {"schema": described.body}}
        written["requestBody"] = {"required": True, "content": json}
    written["responses"] = {
        **deepcopy(described.answers),
        **{status: error_name(status) for status in sorted(failing)},
    }
    return written


def _headers_only(get: dict) -> dict:
    """The `head` of a `get`: the same statuses and headers, no body."""
    return {
        **get,
        "summary": f"{get['summary']}: the headers only",
        "operationId": f"{get['operationId']}Head",
        "responses": {
            status: {key: value for key, value in answer.items() if key != "content"}
            if isinstance(answer, dict)
            else answer
            for status, answer in get["responses"].items()
        },
    }

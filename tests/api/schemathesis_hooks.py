"""schemathesis' hooks for tests/api/test_contract_fuzzing.py, which names this file: what the
document's JSON Schema cannot say, for the fuzzer to send valid data as the service takes it.

- `GET /events?wait=` holds a request up to 30 s when no change comes, longer than the fuzzer
  waits for an answer, and the fuzzer makes no change while it waits: each valid `wait` it
  draws goes as 0. tests/api/test_events.py holds the waits themselves.
- A `PUT /plants/{id}` body may carry the plant's `id`, which must then be the path's: the
  document's `Plant` leaves it out (it cannot say "the path's"), and so does the fuzzer, where
  it drew an `id` among the extra properties a `Plant` may hold. tests/api/test_put.py holds it.

An invalid value goes as drawn, for the service to refuse.
"""

import schemathesis

from plantstore.api.schemas import MAX_FEED_WAIT


@schemathesis.hook
def map_query(context, query):
    wait = query.get("wait") if query else None
    if context.operation.path == "/events" and str(wait).isdigit() and int(wait) <= MAX_FEED_WAIT:
        query["wait"] = 0
    return query


@schemathesis.hook
def map_body(context, body):
    operation = (context.operation.method.upper(), context.operation.path)
    if operation == ("PUT", "/plants/{id}") and isinstance(body, dict):
        body.pop("id", None)
    return body

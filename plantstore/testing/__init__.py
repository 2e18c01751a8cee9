"""What the tests and the benchmark both need to drive the service from outside: the real
gunicorn, a PostgreSQL cluster of their own, a webhook subscriber, wrk's load, and the
PostgreSQL fixtures (setup.cfg loads them for every pytest run).

It lives in the package, as Falcon ships `falcon.testing`, so that `tests/` and `bench/` each
import it and neither imports the other. Nothing in the service imports it (the import
contract in pyproject.toml keeps it at the top). It starts the checkout's `gunicorn.conf.py`
and reads its `deploy/`, so it serves an editable install, as the tests and the bench run.
Helpers that only the tests use stay in tests/support/.
"""

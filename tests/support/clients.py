"""A test client of the app as a gunicorn worker serves it: on the store a worker opens, with
the webhooks it sends (`worker_app`, a fixture of tests/conftest.py, closes them after the
test). The API's tests and the webhooks' take it."""

import falcon.testing

from plantstore.config import Config
from plantstore.testing.webhook_receiver import SECRET
from tests.conftest import TOKEN


def service(worker_app, store_url: str, urls) -> falcon.testing.TestClient:
    """A client with the accepted token, of a worker's app on `store_url` that sends its events
    to `urls` signed with `SECRET`."""
    config = Config(
        tokens=frozenset({TOKEN}),
        store_url=store_url,
        webhook_urls=tuple(urls),
        webhook_secret=SECRET,
    )
    return falcon.testing.TestClient(
        worker_app(config), headers={"Authorization": f"Bearer {TOKEN}"}
    )

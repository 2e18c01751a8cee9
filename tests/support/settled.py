"""A store that makes nothing more in the background, for a property test to draw beside."""

from plantstore.core.stores import PlantStore
from plantstore.stores.postgres import PostgresStore


def settled(store: PlantStore) -> PlantStore:
    """`store`, once its PostgreSQL pool has made the connection it opens with.

    psycopg_pool makes each connection on a thread of its own, and draws on `random` as it does
    (to spread the connections' expiry); hypothesis takes a change of `random`'s state while it
    draws an example for a strategy's use of `random`, a warning the run makes an error. A call
    made before the pool's first connection is ready waits for it, and the pool grows a second
    one for that call, which it makes after the call has its answer: while hypothesis draws.
    Waited for before any call, the first connection serves every call that a test makes one at
    a time, and the pool has no other to make.
    """
    if isinstance(store, PostgresStore):
        pool_of(store).wait()
    return store


def pool_of(store: PostgresStore):
    """The store's psycopg_pool `ConnectionPool`, which only these tests look into."""
    return store._database._pool

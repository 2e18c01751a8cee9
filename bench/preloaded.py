"""`bench.preloaded:app`: the service with plants in its memory store at start, and the feed of
their creation (one event a plant, in id order).

`BENCH_PLANTS` plants are created through the app itself, so the store holds exactly what the
service would keep for them, whatever form that is (`tail`). `BENCH_STOCK` plants, those of
`bench.stock.Stock`, go in through the store's `add` (`bench.stock.fill_memory`), which makes
each one's event as a create does, several times faster: a million in seconds (`feed`). A
server is given one or the other.
"""

import os

from bench.environs import create
from bench.stock import Stock, fill_memory
from plantstore.app import create_app
from plantstore.config import Config
from plantstore.stores.memory import MemoryStore

store = MemoryStore()
app = create_app(Config.from_env(), store)
create(app, 0, int(os.environ.get("BENCH_PLANTS", "0")))
fill_memory(store, Stock(int(os.environ.get("BENCH_STOCK", "0"))))

"""`bench.preloaded:app`: the service with `BENCH_PLANTS` plants in its memory store at start.

The plants are created through the app itself, so the store holds exactly what the service
would keep for them, whatever form that is.
"""

import os

from bench.environs import create
from plantstore.app import create_app
from plantstore.config import Config
from plantstore.stores.memory import MemoryStore

app = create_app(Config.from_env(), MemoryStore())
create(app, 0, int(os.environ.get("BENCH_PLANTS", "0")))

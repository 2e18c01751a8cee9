"""Bytes per stored plant: the memory store (by RSS) and the SQLite files, indexes included.

Plants are created through the app's own request path, each with one of 100 tags, so what is
counted is what the service really keeps for each, its tag index too. The memory store is
measured in a fresh process (`python -m bench.memory PLANTS`), by its resident set size before
and after: that is what the machine pays, allocator overhead and all.
"""

import gc
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.environs import CONFIG, TOKEN, create
from plantstore.app import create_app
from plantstore.config import Config
from plantstore.runtime import Runtime
from plantstore.stores.memory import MemoryStore


def resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def measure_memory_store(plants: int) -> float:
    """Create `plants` plants in this process; give the growth of its RSS per plant."""
    app = create_app(CONFIG, MemoryStore())
    create(app, -10_000, 10_000)
    gc.collect()
    before = resident_bytes()
    create(app, 0, plants)
    gc.collect()
    return (resident_bytes() - before) / plants


def memory_store_bytes_per_plant(plants: int) -> float:
    completed = subprocess.run(
        [sys.executable, "-m", "bench.memory", str(plants)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(completed.stdout)["bytes_per_plant"]


def sqlite_bytes_per_plant(plants: int) -> float:
    """Create `plants` plants in a SQLite store; give the files' size per plant."""
    with tempfile.TemporaryDirectory() as tmp:
        environ = {"PLANTSTORE_TOKENS": TOKEN, "PLANTSTORE_STORE": f"sqlite:///{tmp}/bench.db"}
        config = Config.from_env(environ)
        with Runtime(config) as runtime:
            create(create_app(config, runtime.store), 0, plants)
        return sum(path.stat().st_size for path in Path(tmp).iterdir()) / plants


if __name__ == "__main__":
    print(json.dumps({"bytes_per_plant": measure_memory_store(int(sys.argv[1]))}))

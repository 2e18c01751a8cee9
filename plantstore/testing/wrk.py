"""Load on loopback from wrk (the bench's `plants.lua`): bounded in time, it stops by itself."""

import shutil
from dataclasses import dataclass
from pathlib import Path

from bench.wrk import run_script

WRK = shutil.which("wrk") or "/usr/bin/wrk"


@dataclass
class Load:
    """What wrk saw: every request it completed, the ids answered 200, and what went wrong."""

    requests: int
    acked: list[int]
    other_statuses: dict[str, int]
    errors: dict[str, int]
    seconds: float
    latency_p99_ms: float


def generate_load(
    port: int, token: str, directory: Path, seconds: int, connections: int = 16
) -> Load:
    """Create new plants on `port` for `seconds`, from one wrk thread holding `connections`.

    Each plant is `{"id": N, "name": "plant-N", "tag": "tree"}`, N counting up from 1.
    """
    acked_file = directory / "acked.txt"
    figures = run_script(WRK, port, seconds, connections, token, "create", "1", str(acked_file))
    return Load(
        requests=figures["requests"],
        acked=[int(line) for line in acked_file.read_text().split()],
        other_statuses=figures["other_statuses"],
        errors=figures["socket_errors"],
        seconds=figures["seconds"],
        latency_p99_ms=figures["p99_us"] / 1e3,
    )


def rss_bytes(pid: int) -> int:
    """The resident memory of a process, as the kernel counts it."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise LookupError(f"no VmRSS for process {pid}")

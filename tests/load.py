"""Load on loopback from wrk (tests/load.lua): bounded in time and count, it stops by itself."""

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

LUA = Path(__file__).with_name("load.lua")
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
    port: int,
    token: str,
    directory: Path,
    seconds: int,
    connections: int = 16,
    max_requests: int = 1_000_000,
) -> Load:
    """Create new plants on `port` for `seconds`, from one wrk thread holding `connections`."""
    acked_file = directory / "acked.txt"
    run = subprocess.run(
        [
            *(WRK, "--threads", "1", "--connections", str(connections)),
            *("--duration", f"{seconds}s", "--timeout", "10s", "--script", str(LUA)),
            f"http://127.0.0.1:{port}",
            *("--", token, str(acked_file), str(max_requests)),
        ],
        capture_output=True,
        text=True,
        timeout=seconds + 60,
    )
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout.splitlines()[-1])
    acked = [int(line) for line in acked_file.read_text().split()]
    assert len(acked) == summary["acked"]
    return Load(
        requests=summary["requests"],
        acked=acked,
        other_statuses=summary["other_statuses"],
        errors=summary["errors"],
        seconds=summary["duration_us"] / 1e6,
        latency_p99_ms=summary["latency_p99_us"] / 1e3,
    )


def rss_bytes(pid: int) -> int:
    """The resident memory of a process, as the kernel counts it."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise LookupError(f"no VmRSS for process {pid}")

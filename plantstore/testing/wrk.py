"""Load on loopback from wrk, with `plants.lua`: the script the bench measures with and the load
tests create plants with. A run is bounded in time and stops by itself."""

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

SCRIPT = Path(__file__).with_name("plants.lua")
WRK = shutil.which("wrk") or "/usr/bin/wrk"


def run_script(
    wrk: str, port: int, seconds: float, connections: int, token: str, *mode: str
) -> dict:
    """Run `plants.lua` in one wrk thread with `mode` (see the script), and give its figures."""
    completed = subprocess.run(
        [
            wrk,
            "-t1",
            f"-c{connections}",
            f"-d{seconds}s",
            "--timeout=10s",
            "-s",
            str(SCRIPT),
            f"http://127.0.0.1:{port}/plants",
            "--",
            token,
            "1",
            *mode,
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=seconds + 60,
    )
    line = next(line for line in completed.stdout.splitlines() if line.startswith("BENCH "))
    return json.loads(line.removeprefix("BENCH "))


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

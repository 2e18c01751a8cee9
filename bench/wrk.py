"""wrk, the load generator of choice: installed from Debian when missing and allowed."""

import json
import os
import shutil
import subprocess
from pathlib import Path

from bench.environs import TOKEN
from bench.load import LoadResult

SCRIPT = Path(__file__).with_name("plants.lua")
APT_GET = ["apt-get", "-o", "DPkg::Lock::Timeout=600"]


def ensure_wrk() -> str | None:
    """Give wrk's path, installing the Debian package as root if it is missing; else None."""
    if not shutil.which("wrk") and os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run([*APT_GET, "update", "-qq"], check=False)
        subprocess.run(
            [*APT_GET, "install", "-y", "-qq", "--no-install-recommends", "wrk"], check=False
        )
    return shutil.which("wrk")


def wrk_load(wrk: str, port: int, first_id: int, seconds: float, connections: int) -> LoadResult:
    """Run wrk (one thread: it has one CPU) and read the figures its script prints."""
    threads = 1
    completed = subprocess.run(
        [
            wrk,
            f"-t{threads}",
            f"-c{connections}",
            f"-d{seconds}s",
            "--timeout=10s",
            "-s",
            str(SCRIPT),
            f"http://127.0.0.1:{port}/plants",
            "--",
            str(first_id),
            str(threads),
            TOKEN,
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=seconds + 60,
    )
    line = next(line for line in completed.stdout.splitlines() if line.startswith("BENCH "))
    return LoadResult(**json.loads(line.removeprefix("BENCH ")))

"""wrk, the load generator of choice: installed from Debian when missing and allowed."""

import os
import shutil
import subprocess
import tempfile

from bench.environs import TOKEN
from bench.load import Creates, Deletes, LoadResult, Reads, Replaces, Revalidations, Workload
from plantstore.testing.wrk import run_script

#: The script's mode for each workload of stored plants, which it reads from a file.
MODES = {Reads: "read", Revalidations: "revalidate", Replaces: "replace", Deletes: "delete"}
APT_GET = ["apt-get", "-o", "DPkg::Lock::Timeout=600"]


def ensure_wrk() -> str | None:
    """Give wrk's path, installing the Debian package as root if it is missing; else None."""
    if not shutil.which("wrk") and os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run([*APT_GET, "update", "-qq"], check=False)
        subprocess.run(
            [*APT_GET, "install", "-y", "-qq", "--no-install-recommends", "wrk"], check=False
        )
    return shutil.which("wrk")


def wrk_load(
    wrk: str, port: int, workload: Workload, seconds: float, connections: int
) -> LoadResult:
    """Run wrk (one thread: it has one CPU) and read the figures its script prints.

    A workload of stored plants reaches the script as a file of paths, one a line (of
    revalidations, each path followed by its plant's `ETag`).
    """
    with tempfile.NamedTemporaryFile("w", suffix=".paths") as paths:
        if isinstance(workload, Creates):
            mode = ["create", str(workload.first_id)]
        else:
            lines = workload.paths
            if isinstance(workload, Revalidations):
                lines = (f"{path} {tag}" for path, tag in zip(lines, workload.tags, strict=True))
            paths.write("".join(f"{line}\n" for line in lines))
            paths.flush()
            mode = [MODES[type(workload)], paths.name]
            if isinstance(workload, Replaces):
                mode.append(str(workload.first_version))
        figures = run_script(wrk, port, seconds, connections, TOKEN, *mode)
    return LoadResult(
        requests=figures["requests"],
        seconds=figures["seconds"],
        p50_us=figures["p50_us"],
        p99_us=figures["p99_us"],
        unexpected=sum(figures["other_statuses"].values()),
        socket_errors=sum(figures["socket_errors"].values()),
    )

"""Where the time of one kind of request goes: cProfile over a batch, its top functions."""

import cProfile
import io
import pstats
from itertools import count

from bench.environs import replay
from bench.inprocess import cases


def profile(case_name: str, requests: int, top: int = 25) -> str:
    """Answer `requests` of the case under cProfile; give the `top` lines by own time."""
    case = next(case for case in cases() if case.name == case_name)
    ids = count()
    replay(case.app, case.environs(ids, 100), case.expected)
    environs = case.environs(ids, requests)
    profiler = cProfile.Profile()
    profiler.runcall(replay, case.app, environs, case.expected)
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out).strip_dirs()
    stats.sort_stats(pstats.SortKey.TIME).print_stats(top)
    stats.sort_stats(pstats.SortKey.CUMULATIVE).print_stats(top)
    return out.getvalue()

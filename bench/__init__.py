"""The benchmark of Plant Store: `python -m bench` (bench/README.md has its parts and figures).

Every figure is measured side by side with a floor (a bare Falcon app) in the same run,
interleaved round by round, and reported as medians and ratios: on a shared machine absolute
figures drift, ratios taken this way do not.
"""

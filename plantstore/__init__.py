"""Plant Store: a small, fast HTTP service that keeps plants."""

"""Serving: gunicorn's settings and hooks, and the `plantstore` command."""

"""The `plantstore` command: run the service, make a token, check the configuration.

Every subcommand reads the settings through `plantstore.config` first, so a bad one stops it
with the one `plantstore: ...` line that names the variable, before gunicorn is imported (it
reads `WEB_CONCURRENCY` and `FORWARDED_ALLOW_IPS` itself as it loads, in its own words).
"""

import argparse
import logging
import sys

from plantstore.config import ConfigError
from plantstore.serving import run_token
from plantstore.serving.server_config import check_workers, read_all, unreachable
from plantstore.stores import (
    SchemaTooNew,
    StoreUnavailable,
    StoreUnusable,
    open_store,
    prepare_store,
    store_kind,
)


def _read_settings():
    try:
        return read_all()
    except ConfigError as ex:
        raise SystemExit(f"plantstore: {ex}") from None


def serve(arguments: list[str]) -> None:
    """Run gunicorn with the service's settings; gunicorn's own flags pass through."""
    _read_settings()
    if {"-h", "--help"} & set(arguments):
        print(_serve_help())
        return
    from plantstore.serving.server import Server  # imports gunicorn: only once settings are good

    Server(arguments).run()


def _serve_help() -> str:
    """What `plantstore serve` runs with: the service's settings, as this environment sets them."""
    from plantstore.serving import settings

    shown = {
        "--bind": "127.0.0.1:8000, or 0.0.0.0:$PORT when PORT is set",
        "--workers": f"{settings.workers} (WEB_CONCURRENCY; the memory store takes one)",
        "--worker-class": settings.worker_class,
        "--threads": f"{settings.threads} (GUNICORN_THREADS)",
        "--timeout": f"{settings.timeout} (GUNICORN_TIMEOUT)",
        "--graceful-timeout": f"{settings.graceful_timeout} (GUNICORN_GRACEFUL_TIMEOUT)",
        "--keep-alive": f"{settings.keepalive} (GUNICORN_KEEPALIVE)",
    }
    lines = [
        "usage: plantstore serve [GUNICORN FLAGS]",
        "",
        "Run Plant Store under gunicorn. Its settings here, each overridden by its flag:",
        *(f"  {flag:<19} {value}" for flag, value in shown.items()),
        "",
        "Every other gunicorn flag passes through too (gunicorn --help lists them), e.g.",
        "  plantstore serve --bind 127.0.0.1:8080",
    ]
    return "\n".join(lines)


def token() -> None:
    """Print a fresh token, made as a run without one makes its own."""
    print(run_token.new())


def check() -> None:
    """Read every setting and reach the store: open it, ask it whether a write can succeed.

    It refuses what a start would refuse, a second worker for the memory store included.

    Says which kind of store is ready, never its URL, which may hold a password.
    """
    config, server = _read_settings()
    # A library's own warnings (psycopg's pool retrying) would add lines to the one answer.
    logging.getLogger().addHandler(logging.NullHandler())
    try:
        check_workers(config, server.workers)
        prepare_store(config.store_url, config.store_wait)
    except StoreUnavailable as ex:
        raise SystemExit(f"plantstore: {unreachable(config, ex)}") from None
    except (ConfigError, StoreUnusable, SchemaTooNew) as ex:
        raise SystemExit(f"plantstore: {ex}") from None
    store = open_store(config.store_url)
    try:
        store.check_ready()
    except StoreUnavailable as ex:
        raise SystemExit(f"plantstore: {ex}") from None
    finally:
        store.close()
    print(f"plantstore: ok: the {store_kind(config.store_url)} store is ready")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="plantstore",
        description="Plant Store, a small HTTP service that keeps plants. Every subcommand "
        "reads the settings from the environment (see the README's configuration table).",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser(
        "serve",
        add_help=False,  # serve's --help lists the settings it runs with (`_serve_help`)
        help="run the service under gunicorn; gunicorn's flags pass through (--bind, "
        "--workers, ...: plantstore serve --help lists the service's settings)",
    )
    commands.add_parser(
        "token",
        help="print a fresh random token: add it to PLANTSTORE_TOKENS or as a line of "
        "PLANTSTORE_TOKENS_FILE, and give it to the client, which sends it as "
        "'Authorization: Bearer <token>'",
        description="Print a fresh random token. Add it to PLANTSTORE_TOKENS or as a line of "
        "PLANTSTORE_TOKENS_FILE (running workers read the file again within a second of its "
        "change), and "
        "give it to the client, which sends it as 'Authorization: Bearer <token>'.",
    )
    commands.add_parser(
        "check",
        help="read the settings and reach the store; say what is wrong, or ok",
        description="Read every setting and reach the store: exit 0 saying 'ok' when a write "
        "can succeed now, else 1 with the one-line reason.",
    )
    return parser


def main(argv: list[str] | None = None) -> None:
    """Run the subcommand named in `argv` (the command line by default)."""
    parser = _parser()
    arguments, rest = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    if arguments.command == "serve":
        serve(rest)
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    elif arguments.command == "token":
        token()
    else:
        check()

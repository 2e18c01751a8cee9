"""The `plantstore` command: run the service, make a token, check the configuration."""

import argparse
import logging
import os
import sys
from pathlib import Path

from plantstore.config import ConfigError, env_int, store_kind
from plantstore.core.stores import SchemaTooNew, StoreUnavailable, StoreUnusable
from plantstore.serving.hooks import default_workers
from plantstore.serving.settings import (
    check_gunicorns_variables,
    check_workers,
    read_settings,
    unreachable,
    waiting,
)
from plantstore.stores import open_store, prepare_store
from plantstore.tokens import fresh
from plantstore.tokens.file import line_for

#: The checkout's gunicorn.conf.py, which the package holds too: `plantstore serve` runs it.
GUNICORN_CONF = Path(__file__).with_name("gunicorn.conf.py")


def serve(arguments: list[str]) -> None:
    """Become gunicorn with the package's gunicorn.conf.py, as `gunicorn -c gunicorn.conf.py`
    runs it from the checkout: gunicorn's flags and `GUNICORN_CMD_ARGS` work as they always do.

    The process is replaced, not forked: a service manager's signals reach gunicorn's master.
    The variables gunicorn reads as it loads are checked first, for a line that names a bad one.
    """
    try:
        check_gunicorns_variables()
    except ConfigError as ex:
        raise SystemExit(f"plantstore: {ex}") from None
    command = [sys.executable, "-m", "gunicorn", "--config", str(GUNICORN_CONF), *arguments]
    os.execv(sys.executable, command)


def token(name: str | None, scopes: str | None) -> None:
    """Print a fresh token, made as a run without one makes its own, for its client; then the
    line of the tokens file that accepts it, which holds its digest, never the token."""
    made = fresh.new()
    try:
        line = line_for(made, name, scopes)
    except ValueError as ex:
        raise SystemExit(f"plantstore: {ex}") from None
    print(made)
    print(line)


def check() -> None:
    """Read every setting and reach the store: open it, ask it whether a write can succeed.

    It refuses what a start would refuse, a second worker for the memory store included, and
    waits for the store as a start does, saying so on stderr. Says which kind of store is ready,
    never its URL, which may hold a password.
    """
    # A library's own warnings (psycopg's pool retrying) would add lines to the one answer.
    logging.getLogger().addHandler(logging.NullHandler())
    try:
        config = read_settings()
        check_gunicorns_variables()
        workers = default_workers(os.environ)
        check_workers(config, env_int(os.environ, "WEB_CONCURRENCY", workers, 1, blank_ok=False))
        prepare_store(
            config.store_url,
            config.store_wait,
            on_waiting=lambda ex: print(waiting(config, ex), file=sys.stderr, flush=True),
        )
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
        "reads the settings from the environment (see docs/configuration.md).",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser(
        "serve",
        add_help=False,  # serve's --help is gunicorn's, which lists every flag
        help="run the service: gunicorn with the package's gunicorn.conf.py; gunicorn's flags "
        "(--bind, --workers, ...; plantstore serve --help lists them) and GUNICORN_CMD_ARGS "
        "pass through",
    )
    made = commands.add_parser(
        "token",
        help="print a fresh random token for a client, then the line of PLANTSTORE_TOKENS_FILE "
        "that accepts it (its digest, with --name and --scopes)",
        description="Print a fresh random token, to give to its client, which sends it as "
        "'Authorization: Bearer <token>'; then, on the next line, the line to append to "
        "PLANTSTORE_TOKENS_FILE, which holds the token's digest, never the token (running "
        "workers read the file again within a second of its change).",
    )
    made.add_argument("--name", help="how the logs name the client (token=NAME)")
    made.add_argument(
        "--scopes", help="what it may do: read, write, metrics, comma-separated (all by default)"
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
        token(arguments.name, arguments.scopes)
    else:
        check()

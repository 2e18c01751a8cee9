"""Debian's nginx in the foreground, serving deploy/nginx.conf on loopback for one test; and
the deployment it belongs to, gunicorn with the unit's settings behind it."""

import os
import pwd
import shutil
import signal
import socket
import subprocess
from pathlib import Path

from tests.gunicorn_server import ROOT, GunicornServer, server_environ

SITE = ROOT / "deploy" / "nginx.conf"
UNIT = ROOT / "deploy" / "plantstore.service"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"

#: A main configuration that keeps every file nginx writes in the test's directory (and allows
#: as many connections as Debian's own).
MAIN = """\
user {user};
worker_processes 1;
pid {directory}/nginx.pid;
events {{ worker_connections 768; }}
http {{
    access_log {directory}/access.log;
    client_body_temp_path {directory}/client_body;
    proxy_temp_path {directory}/proxy;
    fastcgi_temp_path {directory}/fastcgi;
    uwsgi_temp_path {directory}/uwsgi;
    scgi_temp_path {directory}/scgi;
    include {directory}/site.conf;
}}
"""


def unit_settings() -> dict[str, str]:
    """The unit's `Name=value` lines, `Environment=` ones by the variable they set."""
    settings = {}
    for line in UNIT.read_text().splitlines():
        name, _, value = line.partition("=")
        if name == "Environment":
            name, _, value = value.partition("=")
        if value and not line.startswith("#"):
            settings[name] = value
    return settings


def unit_gunicorn_flags() -> list[str]:
    """The gunicorn flags the unit's `plantstore serve` passes, but the socket it binds."""
    flags = unit_settings()["ExecStart"].split()
    flags = flags[flags.index("serve") + 1 :]
    del flags[flags.index("--bind") : flags.index("--bind") + 2]
    return flags


def render_site(upstream: str, listen: str, prefix: str = "") -> str:
    """The shipped site, changed only where a deployment changes it (as its comments say)."""
    site = SITE.read_text()
    replacements = {
        "server unix:/run/plantstore/gunicorn.sock": f"server {upstream}",
        "listen 80;": listen,
    }
    if prefix:
        replacements["location / {"] = f"location {prefix}/ {{"
        replacements['proxy_set_header SCRIPT_NAME "";'] = f"proxy_set_header SCRIPT_NAME {prefix};"
    for shipped, deployed in replacements.items():
        assert site.count(shipped) == 1, f"deploy/nginx.conf no longer says {shipped!r}"
        site = site.replace(shipped, deployed)
    return site


class NginxProxy:
    """nginx in front of `upstream` (`unix:PATH` or `HOST:PORT`), on a loopback port.

    The listening socket is made here and handed to nginx the way nginx hands sockets to its
    own next binary: its fd in the `NGINX` variable. nginx takes it over instead of binding,
    so a request sent at once waits in the backlog: nothing to poll, no port to race for.
    With `certificate` (a PEM certificate and key), nginx speaks TLS on it.
    """

    def __init__(
        self,
        directory: Path,
        upstream: str,
        prefix: str = "",
        certificate: tuple[Path, Path] | None = None,
    ) -> None:
        self.directory = directory
        self._socket = socket.create_server(("127.0.0.1", 0))
        self.port = self._socket.getsockname()[1]
        listen = f"listen 127.0.0.1:{self.port};"
        if certificate:
            listen = (
                f"listen 127.0.0.1:{self.port} ssl;\n"
                f"    ssl_certificate {certificate[0]};\n"
                f"    ssl_certificate_key {certificate[1]};"
            )
        (directory / "site.conf").write_text(render_site(upstream, listen, prefix))
        user = pwd.getpwuid(os.geteuid()).pw_name
        (directory / "nginx.conf").write_text(MAIN.format(user=user, directory=directory))
        fd = self._socket.fileno()
        self._process = subprocess.Popen(
            [
                *(NGINX, "-p", str(directory), "-c", str(directory / "nginx.conf")),
                *("-e", str(directory / "error.log"), "-g", "daemon off;"),
            ],
            env={**os.environ, "NGINX": f"{fd};"},
            pass_fds=[fd],
        )

    def stop(self) -> str:
        """Stop at once and give back what nginx wrote to its error log."""
        self._process.send_signal(signal.SIGTERM)
        try:
            self._process.wait(timeout=30)
        finally:
            self._socket.close()
        return (self.directory / "error.log").read_text()


class Deployment:
    """The shipped deployment on loopback: gunicorn on a unix socket, with the unit's settings
    (and `environ` over them), and nginx with the site in front of it, on `port`."""

    def __init__(self, directory: Path, **environ: str) -> None:
        (directory / "gunicorn").mkdir()
        (directory / "nginx").mkdir()
        socket_path = directory / "gunicorn" / "gunicorn.sock"
        self.gunicorn = GunicornServer(
            server_environ(**environ),
            *unit_gunicorn_flags(),
            unix_path=socket_path,
            log_dir=directory / "gunicorn",
        )
        self.nginx = NginxProxy(directory / "nginx", f"unix:{socket_path}")
        self.port = self.nginx.port

    def stop(self) -> tuple[str, str, str]:
        """Stop both: nginx's error log, then gunicorn's access and error logs."""
        nginx_log = self.nginx.stop()
        return (nginx_log, *self.gunicorn.stop())

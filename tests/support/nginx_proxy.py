"""Debian's nginx in the foreground, serving deploy/nginx.conf on loopback for one test: under
a main configuration of the test's own, or under Debian's own as the README's steps leave it;
and the deployment it belongs to, gunicorn with the unit's settings behind it."""

import os
import pwd
import re
import shlex
import shutil
import signal
import socket
import subprocess
from pathlib import Path

from plantstore.testing.gunicorn_server import ROOT, GunicornServer, server_environ

SITE = ROOT / "deploy" / "nginx.conf"
UNIT = ROOT / "deploy" / "plantstore.service"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
#: Where Debian's nginx package keeps its configuration, and the README's steps put the site.
DEBIAN_NGINX = Path("/etc/nginx")
#: The site's `listen` line, which a deployment on another address or with TLS replaces.
LISTEN = "listen 80 default_server;"
#: The site's one upstream server, gunicorn's socket as deploy/plantstore.service binds it,
#: which a deployment with its gunicorn elsewhere, or on several hosts, replaces.
SHIPPED_SERVER = "server unix:/run/plantstore/gunicorn.sock fail_timeout=0;"
#: The site's own logs, which a test keeps in its directory, in the files where its main
#: configuration's logs go.
SITE_LOGS = {
    "access_log /var/log/nginx/plantstore.access.log": "access.log",
    "error_log /var/log/nginx/error.log": "error.log",
}

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


def render_site(
    upstream: str | list[str],
    listen: str,
    logs: Path,
    prefix: str = "",
    changes: dict[str, str] | None = None,
) -> str:
    """The shipped site, changed only where a deployment changes it (as its comments say), and
    with its logs in the directory `logs`.

    `upstream` is the one server in place of the shipped socket (`unix:PATH` or `HOST:PORT`),
    or a list of several hosts' `HOST:PORT`, each on a `server` line of its own, as the
    upstream block's comment shows (a test may add the line's parameters, such as `backup`).
    `changes` are a test's own, each text in place of another that the site holds once.
    """
    site = SITE.read_text()
    if isinstance(upstream, str):
        servers = f"server {upstream} fail_timeout=0;"
    else:
        servers = "\n    ".join(f"server {address};" for address in upstream)
    replacements = {
        SHIPPED_SERVER: servers,
        LISTEN: listen,
        **{log: f"{log.split()[0]} {logs}/{name}" for log, name in SITE_LOGS.items()},
        **(changes or {}),
    }
    if prefix:
        replacements["location / {"] = f"location {prefix}/ {{"
        replacements['proxy_set_header SCRIPT_NAME "";'] = f"proxy_set_header SCRIPT_NAME {prefix};"
    for shipped, deployed in replacements.items():
        assert site.count(shipped) == 1, f"deploy/nginx.conf no longer says {shipped!r}"
        site = site.replace(shipped, deployed)
    return site


def site_seconds(name: str) -> int:
    """The site's time limit `name` (such as client_header_timeout), in seconds."""
    return int(re.search(rf"^\s*{name} (\d+)s;", SITE.read_text(), re.MULTILINE)[1])


class ForegroundNginx:
    """nginx in the foreground on a loopback port, `port`.

    The listening socket is made here and handed to nginx the way nginx hands sockets to its
    own next binary: its fd in the `NGINX` variable. nginx takes it over instead of binding,
    so a request sent at once waits in the backlog: nothing to poll, no port to race for.
    What nginx writes to its error log, `error.log` in `directory`, comes back from `stop()`.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._socket = socket.create_server(("127.0.0.1", 0))
        # As nginx makes its own: with more than one worker, the workers that lose the race
        # to accept a connection must not wait in accept() for the next one (and past a stop).
        self._socket.setblocking(False)
        self.port = self._socket.getsockname()[1]

    def start(self, *arguments: str) -> None:
        """Start nginx with `arguments` (its main configuration, and the like)."""
        fd = self._socket.fileno()
        self._process = subprocess.Popen(
            [NGINX, *arguments, "-g", "daemon off;"],
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


class NginxProxy(ForegroundNginx):
    """nginx in front of `upstream` (`unix:PATH` or `HOST:PORT`, or a list of hosts'
    `HOST:PORT`: see `render_site`), on a loopback port, with the site alone in a main
    configuration of the test's own. With `certificate` (a PEM certificate and key), nginx
    speaks TLS on it; with `changes`, the site as the test changes it (see `render_site`)."""

    def __init__(
        self,
        directory: Path,
        upstream: str | list[str],
        prefix: str = "",
        certificate: tuple[Path, Path] | None = None,
        changes: dict[str, str] | None = None,
    ) -> None:
        super().__init__(directory)
        listen = f"listen 127.0.0.1:{self.port};"
        if certificate:
            listen = (
                f"listen 127.0.0.1:{self.port} ssl;\n"
                f"    ssl_certificate {certificate[0]};\n"
                f"    ssl_certificate_key {certificate[1]};"
            )
        site = render_site(upstream, listen, directory, prefix, changes)
        (directory / "site.conf").write_text(site)
        user = pwd.getpwuid(os.geteuid()).pw_name
        (directory / "nginx.conf").write_text(MAIN.format(user=user, directory=directory))
        self.start(
            *("-p", str(directory), "-c", str(directory / "nginx.conf")),
            *("-e", str(directory / "error.log")),
        )


def readme_deployment() -> str:
    """The README's commands that install the unit and the site."""
    readme = (ROOT / "README.md").read_text()
    return readme.split("## Behind nginx", 1)[1].split("```sh", 1)[1].split("```", 1)[0]


def readme_nginx_steps() -> list[str]:
    """The README's commands that lay out nginx's configuration: every one that names a file
    under /etc/nginx. They copy, link and remove files, and edit Debian's nginx.conf in place
    with `sed -i` (its connections), and nothing else."""
    steps = [line for line in readme_deployment().splitlines() if f"{DEBIAN_NGINX}/" in line]
    for step in steps:
        for command in step.split(" && "):
            words = shlex.split(command)
            edit = words[:2] == ["sed", "-i"] and words[-1] == f"{DEBIAN_NGINX}/nginx.conf"
            assert edit or words[0] in {"rm", "cp", "ln"}, f"not a file's step: {step}"
    return steps


def on_loopback(configuration: str, port: int) -> str:
    """`configuration` with its servers on port 80 moved to `port` of the loopback addresses."""
    configuration = re.sub(
        r"^(\s*listen )80\b", rf"\g<1>127.0.0.1:{port}", configuration, flags=re.M
    )
    return re.sub(r"^(\s*listen )\[::\]:80\b", rf"\g<1>[::1]:{port}", configuration, flags=re.M)


def lay_out_debian_nginx(directory: Path, upstream: str, port: int, steps: list[str]) -> Path:
    """Copy Debian's /etc/nginx into `directory`, apply `steps` to the copy (from a checkout
    whose site passes requests to `upstream`), and give back the copy's main configuration.

    The copy differs from what the steps make of /etc/nginx only where a test must: its
    servers listen on `port` of loopback, not on 80, and nginx keeps its pid, logs and
    temporary files in `directory` and runs its workers as this user, not in /run and /var as
    www-data.
    """
    etc = directory / "etc" / "nginx"
    shutil.copytree(DEBIAN_NGINX, etc, symlinks=True)
    for link in etc.rglob("*"):
        if link.is_symlink() and link.readlink().is_relative_to(DEBIAN_NGINX):
            target = etc / link.readlink().relative_to(DEBIAN_NGINX)
            link.unlink()
            link.symlink_to(target)
    checkout = directory / "checkout"
    (checkout / "deploy").mkdir(parents=True)
    (checkout / "deploy" / "nginx.conf").write_text(render_site(upstream, LISTEN, directory))
    commands = "\n".join(steps).replace(str(DEBIAN_NGINX), shlex.quote(str(etc)))
    subprocess.run(["bash", "-euc", commands], cwd=checkout, check=True, timeout=30)
    for site in (etc / "sites-available").iterdir():
        site.write_text(on_loopback(site.read_text(), port))
    main = etc / "nginx.conf"
    user = pwd.getpwuid(os.geteuid()).pw_name
    replacements = {
        "user www-data;": f"user {user};",
        "pid /run/nginx.pid;": f"pid {directory}/nginx.pid;",
        "error_log /var/log/nginx/error.log;": f"error_log {directory}/error.log;",
        "access_log /var/log/nginx/access.log;": f"access_log {directory}/access.log;",
        "http {\n": "http {\n"
        + "".join(
            f"    {kind}_temp_path {directory}/{kind};\n"
            for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        ),
    }
    configuration = main.read_text()
    for stock, here in replacements.items():
        assert configuration.count(stock) == 1, f"Debian's nginx.conf no longer says {stock!r}"
        configuration = configuration.replace(stock, here)
    main.write_text(configuration.replace(str(DEBIAN_NGINX), str(etc)))
    return main


def check_configuration(main: Path) -> subprocess.CompletedProcess:
    """`nginx -t` of the main configuration `main`, as the README's steps run it."""
    return subprocess.run(
        [NGINX, "-t", "-c", str(main)], capture_output=True, text=True, timeout=30
    )


class DebianNginx(ForegroundNginx):
    """Debian's nginx as the README's steps leave it, in front of `upstream`, on a loopback
    port (see `lay_out_debian_nginx`)."""

    def __init__(self, directory: Path, upstream: str) -> None:
        super().__init__(directory)
        main = lay_out_debian_nginx(directory, upstream, self.port, readme_nginx_steps())
        checked = check_configuration(main)
        assert checked.returncode == 0, checked.stderr
        self.start("-c", str(main))


class Deployment:
    """The shipped deployment on loopback: gunicorn on a unix socket, with the unit's settings
    (and `environ` over them), and nginx with the site in front of it, on `port`: alone in a
    configuration of the test's own, or with `nginx=DebianNginx`, as the README installs it."""

    def __init__(
        self,
        directory: Path,
        nginx: type[NginxProxy | DebianNginx] = NginxProxy,
        **environ: str,
    ) -> None:
        (directory / "gunicorn").mkdir()
        (directory / "nginx").mkdir()
        socket_path = directory / "gunicorn" / "gunicorn.sock"
        self.gunicorn = GunicornServer(
            server_environ(**environ),
            *unit_gunicorn_flags(),
            unix_path=socket_path,
            log_dir=directory / "gunicorn",
        )
        self.nginx = nginx(directory / "nginx", f"unix:{socket_path}")
        self.port = self.nginx.port

    def stop(self) -> tuple[str, str, str]:
        """Stop both: nginx's error log, then gunicorn's access and error logs."""
        nginx_log = self.nginx.stop()
        return (nginx_log, *self.gunicorn.stop())

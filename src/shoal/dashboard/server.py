"""The dashboard's web server: the standard library's threading HTTP server, one HTML page,
its script and style sheet (``static/``, shipped in the package: nothing loads from outside,
and the Content-Security-Policy forbids it), and three JSON endpoints:

=======================  ==================================================================
``/api/cluster``         the local gossip daemon's view, else the hosts of running jobs
``/api/jobs``            every job of the registry, newest first
``/api/job/ID?since=T``  job ID's summary, its PEs' rows and its events newer than T
=======================  ==================================================================

The token. Bound to ``localhost``, ``127.0.0.1`` or ``::1`` the dashboard answers without one
(unless ``--token`` is given), and only to requests whose ``Host`` names this machine's
loopback (a page elsewhere cannot reach it by DNS rebinding). Bound to any other address it
needs one, as Jupyter does: generated unless given, printed with the URL. A request carries
it as ``?token=`` (a page then sets a cookie and reloads without it in the address bar), as
that cookie, or as an ``Authorization: token T`` header; any other request gets 403.
"""

from __future__ import annotations

import errno
import hmac
import ipaddress
import re
import secrets
import socket
import sys
from http import HTTPStatus
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

from shoal.dashboard import data
from shoal.errors import UsageError

LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
"""Bound to one of these, the dashboard needs no token (the brief of issue 29, Jupyter's
rule): only users of this machine reach it."""
DEFAULT_PORT = 8787
PAGES = re.compile(r"^/(cluster|jobs|job/[^/]+)?/?$")
STATIC_NAME = re.compile(r"^[A-Za-z0-9_-]+\.(html|js|css|svg)$")
TYPES = {"html": "text/html; charset=utf-8", "js": "text/javascript; charset=utf-8",
         "css": "text/css; charset=utf-8", "svg": "image/svg+xml"}
SECURITY_HEADERS = {
    "Content-Security-Policy": ("default-src 'none'; script-src 'self'; style-src 'self'; "
                                "img-src 'self' data:; connect-src 'self'; "
                                "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def needs_token(host: str) -> bool:
    """Does a dashboard bound to ``host`` need a token? Yes unless it is a loopback name."""
    return host.strip("[]") not in LOCAL_HOSTS


def static_file(name: str) -> bytes | None:
    """The bytes of ``static/NAME`` shipped in the package, or None when there is none."""
    if not STATIC_NAME.match(name):
        return None
    path = resources.files("shoal.dashboard").joinpath("static", name)
    try:
        return path.read_bytes()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None


class Dashboard(ThreadingHTTPServer):
    """The server: where it finds jobs (``root``, the registry) and the gossip daemon
    (``gossip_dir``), and its token (None: none needed)."""

    daemon_threads = True

    def __init__(self, address: tuple[Any, ...], family: int, host: str, token: str | None,
                 root: str | None, gossip_dir: str | None, verbose: bool = False):
        self.address_family = family
        self.host, self.token, self.root, self.gossip_dir = host, token, root, gossip_dir
        self.verbose = verbose
        super().__init__(address, Handler)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def cookie(self) -> str:
        """The token's cookie, one per port (two dashboards on one host keep theirs)."""
        return f"shoal-dashboard-{self.port}"

    def url(self, path: str = "/") -> str:
        """The address to open, with the token when one is needed."""
        shown = self.host
        if shown in ("", "0.0.0.0", "::"):
            shown = socket.gethostname()
        if ":" in shown:
            shown = f"[{shown}]"
        query = f"?{urlencode({'token': self.token})}" if self.token else ""
        return f"http://{shown}:{self.port}{path}{query}"


def make_server(host: str = "127.0.0.1", port: int = DEFAULT_PORT, token: str | None = None,
                root: str | None = None, gossip_dir: str | None = None,
                verbose: bool = False) -> Dashboard:
    """A bound dashboard (not serving yet: call ``serve_forever``). A token is generated
    when ``host`` is not a loopback name and none is given. Raises UsageError for a port out
    of range or in use, an empty token, a host that does not resolve or is not this
    machine's."""
    if not 0 <= port <= 65535:
        raise UsageError(f"--port {port} is not a TCP port: give 1-65535 (0: any free one)")
    if token is not None and not token.strip():
        raise UsageError("--token is empty: give a secret string, or leave the option out "
                         "for a generated one")
    if token is None and needs_token(host):
        token = secrets.token_urlsafe(24)
    family, address = _resolve(host, port)
    try:
        return Dashboard(address, family, host.strip("[]"), token, root, gossip_dir, verbose)
    except OSError as exc:
        raise UsageError(_bind_message(exc, host, port)) from None


def _resolve(host: str, port: int) -> tuple[int, tuple[Any, ...]]:
    bare = host.strip("[]")
    if not bare:
        raise UsageError("--host is empty: give an address or name of this machine "
                         "(127.0.0.1 by default; 0.0.0.0 for every interface)")
    try:
        infos = socket.getaddrinfo(bare, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise UsageError(f"--host {host!r} does not resolve ({exc}): give an address or name "
                         "of this machine (127.0.0.1 by default; 0.0.0.0 for every "
                         "interface)") from None
    family, _, _, _, address = infos[0]
    return int(family), tuple(address)


def _bind_message(exc: OSError, host: str, port: int) -> str:
    if exc.errno == errno.EADDRINUSE:
        return (f"port {port} is in use on {host}: pass another --port (--port 0 takes any "
                "free one), or stop what listens there")
    if exc.errno == errno.EADDRNOTAVAIL:
        return (f"--host {host} is not an address of this machine: give one of its own "
                "(127.0.0.1 by default; 0.0.0.0 for every interface)")
    if exc.errno == errno.EACCES:
        return f"port {port} needs privileges to bind: pass a --port above 1023"
    return f"cannot listen on {host}:{port} ({exc.strerror or exc}): pass another --host/--port"


def _host_name(header: str) -> str:
    """The name in a ``Host`` header, without its port (IPv6 literals without brackets)."""
    if header.startswith("["):
        return header[1:].split("]", 1)[0]
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def _loopback(name: str) -> bool:
    if name in LOCAL_HOSTS:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class Handler(BaseHTTPRequestHandler):
    server: Dashboard
    server_version = "shoal-dashboard"

    # -- access ----------------------------------------------------------------------------
    def _presented(self, query: dict[str, list[str]]) -> list[str]:
        given = list(query.get("token", []))
        jar = SimpleCookie()
        try:
            jar.load(self.headers.get("Cookie", ""))
        except Exception:  # (http.cookies.CookieError: a malformed header presents nothing)
            jar = SimpleCookie()
        if self.server.cookie in jar:
            given.append(jar[self.server.cookie].value)
        auth = self.headers.get("Authorization", "")
        if auth.lower().startswith("token "):
            given.append(auth[6:].strip())
        return given

    def _allowed(self, query: dict[str, list[str]]) -> bool:
        token = self.server.token
        if token is None:  # bound to loopback: only pages of this machine's loopback
            host = self.headers.get("Host")
            return host is None or _loopback(_host_name(host)) or \
                _host_name(host) == self.server.host
        return any(hmac.compare_digest(t.encode(), token.encode())
                   for t in self._presented(query))

    # -- requests --------------------------------------------------------------------------
    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        if not self._allowed(query):
            self._text(HTTPStatus.FORBIDDEN,
                       "403: this dashboard needs its token: open the address `shoal "
                       "dashboard` printed (it ends in ?token=...)\n")
            return
        if "token" in query and PAGES.match(url.path):
            self._enter(url.path, query)
            return
        try:
            self._route(url.path, query)
        except BrokenPipeError:
            pass

    def _enter(self, path: str, query: dict[str, list[str]]) -> None:
        """A page opened with ``?token=``: keep the token in a cookie, reload without it."""
        rest = {k: v for k, v in query.items() if k != "token"}
        location = quote(path) + (f"?{urlencode(rest, doseq=True)}" if rest else "")
        self.send_response(HTTPStatus.FOUND)
        self.send_header("Location", location)
        self.send_header("Set-Cookie", f"{self.server.cookie}={self.server.token}; Path=/; "
                         "HttpOnly; SameSite=Strict")
        self.send_header("Content-Length", "0")
        self._common_headers()
        self.end_headers()

    def _route(self, path: str, query: dict[str, list[str]]) -> None:
        if path.startswith("/api/"):
            self._api(path[len("/api/"):], query)
        elif path.startswith("/static/"):
            body = static_file(path[len("/static/"):])
            if body is None:
                self._text(HTTPStatus.NOT_FOUND, f"404: no file {path}\n")
            else:
                kind = TYPES[path.rsplit(".", 1)[1]]
                self._send(HTTPStatus.OK, body, kind, cache="no-cache")
        elif PAGES.match(path):
            body = static_file("index.html")
            assert body is not None, "the package lacks shoal/dashboard/static/index.html"
            self._send(HTTPStatus.OK, body, "text/html; charset=utf-8", cache="no-cache")
        elif path == "/favicon.ico":
            body = static_file("favicon.svg") or b""
            self._send(HTTPStatus.OK, body, "image/svg+xml", cache="max-age=86400")
        else:
            self._text(HTTPStatus.NOT_FOUND, f"404: no page {path} (pages: /cluster, /jobs, "
                       "/job/ID)\n")

    def _api(self, what: str, query: dict[str, list[str]]) -> None:
        srv = self.server
        try:
            if what == "cluster":
                answer = data.cluster(srv.gossip_dir, srv.root)
            elif what == "jobs":
                answer = data.jobs(srv.root)
            elif what.startswith("job/") and len(what) > 4:
                answer = data.job(srv.root, unquote(what[4:]), _since(query))
            else:
                self._json(HTTPStatus.NOT_FOUND, {"error": f"no endpoint /api/{what} "
                           "(there are /api/cluster, /api/jobs, /api/job/ID?since=T)"})
                return
        except UsageError as exc:
            self._json(HTTPStatus.NOT_FOUND if "no job" in str(exc) else HTTPStatus.BAD_REQUEST,
                       {"error": str(exc)})
            return
        except ImportError as exc:
            self._json(HTTPStatus.SERVICE_UNAVAILABLE,
                       {"error": f"this shoal cannot read job data ({exc})"})
            return
        self._json(HTTPStatus.OK, answer)

    # -- answers ---------------------------------------------------------------------------
    def _common_headers(self) -> None:
        for name, value in SECURITY_HEADERS.items():
            self.send_header(name, value)

    def _send(self, status: HTTPStatus, body: bytes, kind: str, cache: str = "no-store") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", cache)
        self._common_headers()
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: HTTPStatus, value: Any) -> None:
        self._send(status, data.finite_json(value), "application/json")

    def _text(self, status: HTTPStatus, text: str) -> None:
        self._send(status, text.encode(), "text/plain; charset=utf-8")

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.verbose:
            sys.stderr.write(f"shoal dashboard: {self.address_string()} {format % args}\n")


def _since(query: dict[str, list[str]]) -> float:
    text = (query.get("since") or ["0"])[-1]
    try:
        since = float(text)
    except ValueError:
        raise UsageError(f"since={text!r} is not a time: give unix seconds (0: all)") from None
    if since != since or since in (float("inf"), float("-inf")):
        raise UsageError(f"since={text!r} is not a finite time")
    return since


def serve(server: Dashboard) -> None:
    """Serve until Ctrl-C or SIGTERM; the socket is closed either way."""
    try:
        server.serve_forever(poll_interval=0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


__all__ = ["DEFAULT_PORT", "Dashboard", "make_server", "needs_token", "serve", "static_file"]

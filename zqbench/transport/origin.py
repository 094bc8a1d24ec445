"""Where requests go, and how TLS to it is verified: shared by the load transports and the
control-plane client (`zqbench.target.control`), so both read a target URL and check certificates
the same way.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

from zqbench.errors import UsageError
from zqbench.redact import redact_url


@dataclass(frozen=True, slots=True)
class Origin:
    """Where requests go: scheme, host, port, and a path prefix put before every request path."""

    scheme: str
    host: str
    port: int
    prefix: str  # "" or "/something" (no trailing slash)

    @property
    def tls(self) -> bool:
        return self.scheme == "https"

    @property
    def authority(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.tls else 80
        return host if self.port == default else f"{host}:{self.port}"

    @property
    def address(self) -> str:
        """host:port, as error messages name the target."""
        return f"{self.host}:{self.port}"

    def url(self, path: str) -> str:
        return f"{self.scheme}://{self.authority}{self.prefix}{path}"


def parse_base_url(base_url: str) -> Origin:
    """Validate a target URL; a bad one is the user's mistake, so UsageError with one line."""
    shown = redact_url(base_url)  # never echo credentials back into a log
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in base_url):
        # A CR/LF would split the request line: refused here, never sent or echoed raw.
        raise UsageError(f"bad target URL {shown!r}: it contains a control character")
    try:
        parts = urlsplit(base_url)
        port = parts.port
    except ValueError as e:
        raise UsageError(f"bad target URL {shown!r}: {e}") from None
    if parts.scheme not in ("http", "https"):
        raise UsageError(f"bad target URL {shown!r}: the scheme must be http or https")
    if not parts.hostname:
        raise UsageError(f"bad target URL {shown!r}: no host")
    if parts.query or parts.fragment:
        raise UsageError(f"bad target URL {shown!r}: no query or fragment allowed")
    if parts.username or parts.password:
        # Credentials in the URL would end up in reports; headers carry them instead.
        raise UsageError(f"bad target URL {shown!r}: put credentials in headers, not the URL")
    if port is None:
        port = 443 if parts.scheme == "https" else 80
    if port == 0:
        raise UsageError(f"bad target URL {base_url!r}: port 0")
    return Origin(parts.scheme, parts.hostname, port, parts.path.rstrip("/"))


def client_ssl_context(insecure: bool, alpn: list[str]) -> ssl.SSLContext:
    """The default, verifying context; `insecure` accepts self-signed certificates."""
    ctx = ssl.create_default_context()
    if insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(alpn)
    return ctx

"""The listening TCP socket under the controller's HTTP servers (probes, metrics, webhook)."""

from __future__ import annotations

import socket


def listening_socket(host: str, port: int) -> socket.socket:
    """A non-blocking socket listening on ``host:port`` (IPv6 when ``host`` has a colon; port 0
    binds an ephemeral port). The caller owns it: creating it here, rather than letting aiohttp
    bind, means a server cancelled half-way through starting still has a socket to close."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock

"""A loopback HTTP proxy that adds a bearer API key to every request it forwards.

For clients that cannot send headers of their own (the MCP conformance runner takes only a URL):
every other header, `Host` and `Origin` included, goes upstream unchanged, so what the server
decides on them (DNS-rebinding protection) is what the client would get talking to it directly.
"""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}


def start_auth_proxy(upstream: str, token: str) -> tuple[ThreadingHTTPServer, str]:
    """Serve on 127.0.0.1 (a free port) in a daemon thread; returns the server and its base URL."""
    target = urlsplit(upstream)

    class Forward(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _forward(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP | {"authorization"}}
            headers["Authorization"] = f"Bearer {token}"
            connection = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
            try:
                connection.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                for name, value in headers.items():
                    connection.putheader(name, value)
                connection.endheaders(body)
                response = connection.getresponse()
                data = response.read()
            finally:
                connection.close()
            self.send_response(response.status, response.reason)
            for name, value in response.getheaders():
                if name.lower() not in HOP_BY_HOP | {"content-length"}:
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_DELETE = do_OPTIONS = _forward

        def log_message(self, format, *args) -> None:  # quiet: tests read results, not access logs
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Forward)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="auth-proxy", daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"

"""A real HTTP endpoint for webhook tests."""

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Receiver:
    """A real HTTP endpoint on 127.0.0.1 that answers with scripted status codes."""

    def __init__(self, statuses=()):
        self.statuses = list(statuses)
        self.requests: list[tuple[dict, bytes]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.requests.append(({k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(receiver.statuses.pop(0) if receiver.statuses else 204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

"""A local HTTP stub server on 127.0.0.1 (the faked LLM endpoint of the memory tests)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve ``handler`` on a free loopback port; yields the OpenAI-style base URL ``http://127.0.0.1:PORT/v1``."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def chat_endpoint(reply: bytes | None = None, content: str | None = None, drip_s: float = 0.0,
              seen: list[dict[str, Any]] | None = None) -> type[BaseHTTPRequestHandler]:
    """A fake chat-completions endpoint: ``content`` as the assistant's text, or ``reply`` as
    the raw body; ``drip_s`` sends the body a byte at a time that far apart."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            request = json.loads(self.rfile.read(length))
            if seen is not None:
                seen.append({"body": request, "authorization": self.headers.get("Authorization")})
            body = reply if reply is not None else json.dumps(
                {"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                if drip_s:
                    for index in range(len(body)):
                        self.wfile.write(body[index:index + 1])
                        self.wfile.flush()
                        time.sleep(drip_s)  # the hostile endpoint's behaviour, not synchronisation
                else:
                    self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, *args: object) -> None:
            pass

    return Handler

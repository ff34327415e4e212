"""Function targets served over real HTTP on loopback, in this process (werkzeug, threaded): what an
HTTP client such as clients/python talks to in tests. Each uses the per-test database (service_env)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from werkzeug.serving import make_server

from support.paths import ROOT


@contextmanager
def serve(*targets: str) -> Iterator[dict[str, str]]:
    """{target: 'http://127.0.0.1:<port>/'} while the block runs."""
    import functions_framework

    servers, urls = [], {}
    try:
        for target in targets:
            app = functions_framework.create_app(target, str(ROOT / "functions" / "main.py"))
            server = make_server("127.0.0.1", 0, app, threaded=True)
            threading.Thread(target=server.serve_forever, name=f"serve-{target}", daemon=True).start()
            servers.append(server)
            urls[target] = f"http://127.0.0.1:{server.server_port}/"
        yield urls
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()

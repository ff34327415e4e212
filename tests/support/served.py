"""Function targets served over real HTTP on loopback, in this process (werkzeug, threaded): what an
HTTP client such as clients/python talks to in tests. Each uses the per-test database (service_env)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from werkzeug.serving import make_server

from support.paths import ROOT


@contextmanager
def serve(*targets: str, ports: dict[str, int] | None = None) -> Iterator[dict[str, str]]:
    """{target: 'http://127.0.0.1:<port>/'} while the block runs; `ports` fixes some targets' ports
    (a target whose own URL is configured, like delivery_reports' DELIVERY_REPORTS_URL)."""
    import functions_framework

    servers, urls = [], {}
    try:
        for target in targets:
            app = functions_framework.create_app(target, str(ROOT / "functions" / "main.py"))
            server = make_server("127.0.0.1", (ports or {}).get(target, 0), app, threaded=True)
            # a short poll: shutdown() waits for the loop to look (0.5 s by default, per server)
            loop = threading.Thread(target=server.serve_forever, args=(0.02,), name=f"serve-{target}", daemon=True)
            loop.start()
            servers.append(server)
            urls[target] = f"http://127.0.0.1:{server.server_port}/"
        yield urls
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()

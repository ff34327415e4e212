"""HTTP/1.1 byte for byte over one socket: what a test needs to send what HTTP clients will not (a
body longer or shorter than its Content-Length, chunked bodies of any size) and to read every
answer the server writes on the same keep-alive connection."""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]  # lower-case names
    body: bytes

    @property
    def mimetype(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip()

    def json(self) -> Any:
        return json.loads(self.body)


def request_bytes(
    method: str,
    path: str,
    headers: dict[str, str] | None = None,
    body: bytes = b"",
    *,
    chunked: bool = False,
    content_length: int | None = None,
    chunk_size: int = 4096,
) -> bytes:
    """One request as sent on the wire; `content_length` declares another length than the body's."""
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    if chunked:
        lines.append("Transfer-Encoding: chunked")
        parts = [body[i : i + chunk_size] for i in range(0, len(body), chunk_size)]
        payload = b"".join(f"{len(part):x}\r\n".encode() + part + b"\r\n" for part in parts) + b"0\r\n\r\n"
    else:
        lines.append(f"Content-Length: {len(body) if content_length is None else content_length}")
        payload = body
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + payload


class Connection:
    """One TCP connection to a server; `answer()` is None once the server closed it."""

    def __init__(self, url: str, timeout: float = 15.0) -> None:
        parts = urlsplit(url)
        self.sock = socket.create_connection((parts.hostname, parts.port), timeout=timeout)
        self.file = self.sock.makefile("rb")

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def finish_sending(self) -> None:
        """Half-close: the server reads end-of-stream where it expected more body."""
        self.sock.shutdown(socket.SHUT_WR)

    def answer(self) -> Answer | None:
        try:
            status_line = self.file.readline()
        except (ConnectionError, TimeoutError):
            return None
        if not status_line:
            return None
        status = int(status_line.split()[1])
        headers: dict[str, str] = {}
        while (line := self.file.readline()) not in (b"\r\n", b"\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        return Answer(status, headers, self._body(headers))

    def _body(self, headers: dict[str, str]) -> bytes:
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while size := int(self.file.readline().split(b";")[0], 16):
                body += self.file.read(size)
                self.file.readline()
            while self.file.readline() not in (b"\r\n", b"\n", b""):  # trailers
                pass
            return body
        if "content-length" in headers:
            return self.file.read(int(headers["content-length"]))
        return self.file.read()  # no length: the body runs to the connection's close

    def exchange(self, data: bytes) -> Answer | None:
        self.send(data)
        return self.answer()

    def close(self) -> None:
        self.file.close()
        self.sock.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

"""The web server as it runs in production, in a process of its own, and a raw HTTP client.

Raw sockets rather than a client library: the tests must control exactly what is sent and
when (headers without the body, a body in chunks while watching for an early answer), and
never hold a large body in memory.
"""

from __future__ import annotations

import http.client
import os
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MiB = 2**20
# The documented way to run the web front (docs/operations.md).
SERVER = [sys.executable, "-m", "provingsite.server", "-b", "127.0.0.1"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class WebServer:
    data_dir: Path
    env: dict[str, str]
    port: int = 0
    popen: subprocess.Popen[bytes] | None = None
    log_path: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log_path = self.data_dir / "server.log"

    def manage(self, *args: str) -> str:
        return subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], cwd=ROOT, env=self.env,
                              check=True, capture_output=True, text=True, timeout=180).stdout

    def python(self, code: str) -> str:
        setup = "import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'provingsite.settings'; django.setup()\n"
        return subprocess.run([sys.executable, "-c", setup + code], cwd=ROOT, env=self.env, check=True,
                              capture_output=True, text=True, timeout=120).stdout.strip()

    def start(self) -> WebServer:
        self.port = free_port()
        with open(self.log_path, "ab") as log:
            self.popen = subprocess.Popen([*SERVER, "-p", str(self.port)], cwd=ROOT, env=self.env,
                                          stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                raise RuntimeError(f"the server exited with {self.popen.returncode}:\n{self.log()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.1)  # polling for the port to open, not standing in for work
        raise RuntimeError(f"the server did not listen within 60 s:\n{self.log()}")

    def stop(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(10)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def memory_kib(self, key: str) -> int:
        """VmRSS (resident now) or VmHWM (the most it was ever resident) of the server process."""
        assert self.popen is not None
        for line in Path(f"/proc/{self.popen.pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
        raise KeyError(key)

    def reset_peak(self) -> None:
        """Start VmHWM afresh from the current RSS, so a peak is this test's own (proc(5))."""
        assert self.popen is not None
        Path(f"/proc/{self.popen.pid}/clear_refs").write_text("5")

    def connect(self, timeout: float = 30) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=timeout)


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes


def send_head(sock: socket.socket, method: str, path: str, headers: dict[str, str]) -> None:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", *(f"{k}: {v}" for k, v in headers.items())]
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))


def read_answer(sock: socket.socket) -> Answer:
    response = http.client.HTTPResponse(sock)
    response.begin()
    return Answer(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())


def request(server: WebServer, method: str, path: str, headers: dict[str, str] | None = None,
            body: bytes = b"", timeout: float = 30) -> Answer:
    with server.connect(timeout) as sock:
        send_head(sock, method, path, {"Content-Length": str(len(body)), "Connection": "close", **(headers or {})})
        sock.sendall(body)
        return read_answer(sock)


def answered(sock: socket.socket) -> bool:
    return bool(select.select([sock], [], [], 0)[0])


def zeros(total: int, block: int = MiB) -> Iterator[bytes]:
    """``total`` bytes in blocks of one reused buffer: the body is never in memory whole."""
    chunk = bytes(block)
    memory = memoryview(chunk)
    while total > 0:
        size = min(block, total)
        yield memory[:size].tobytes() if size < block else chunk
        total -= size


def stream_until_answered(sock: socket.socket, pieces: Iterator[bytes], chunked: bool = False) -> int:
    """Send the pieces until the server answers (or stops reading); the bytes sent."""
    sent = 0
    for piece in pieces:
        if answered(sock):
            break
        try:
            sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
        except (BrokenPipeError, ConnectionResetError):
            break
        sent += len(piece)
    else:
        if chunked:
            sock.sendall(b"0\r\n\r\n")
    return sent


def multipart(size: int, boundary: str = "provingsite-test") -> tuple[dict[str, str], Iterator[bytes]]:
    """A multipart body of exactly ``size`` bytes with one file part of zeros, streamed."""
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"zkey\"; filename=\"big.zkey\"\r\n"
            "Content-Type: application/octet-stream\r\n\r\n").encode()
    tail = f"\r\n--{boundary}--\r\n".encode()

    def pieces() -> Iterator[bytes]:
        yield head
        yield from zeros(size - len(head) - len(tail))
        yield tail

    return {"Content-Type": f"multipart/form-data; boundary={boundary}"}, pieces()


def server_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PROVINGSITE_", "DATABASE_URL", "REDIS_URL"))}
    return env | {"PROVINGSITE_DATA_DIR": str(data_dir), "DJANGO_SETTINGS_MODULE": "provingsite.settings"} | extra


def migrated_server(data: Path, env: dict[str, str]) -> Iterator[WebServer]:
    """A server on a freshly migrated database in ``data``, stopped when the caller is done."""
    web = WebServer(data, env)
    web.manage("migrate", "--no-input", "-v0")
    web.start()
    try:
        yield web
    finally:
        web.stop()

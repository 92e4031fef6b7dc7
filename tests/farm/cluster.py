"""A PostgreSQL cluster of a test's own: initdb into a temporary folder, started on a free port,
restarted and stopped at will, removed afterwards. The shared server is never touched.

PostgreSQL refuses to run as root: as root, initdb and pg_ctl run as the ``postgres`` user
(``runuser``), which then owns the folder. The binaries are looked for where Debian puts
them (``/usr/lib/postgresql/<major>/bin``), or under ``PROVINGSITE_PG_BIN``.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

from tests.farm.harness import FarmError, free_port, wait_for


def _bin_dir() -> Path | None:
    configured = os.environ.get("PROVINGSITE_PG_BIN")
    candidates = [Path(configured)] if configured else sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
    for candidate in candidates:
        if (candidate / "initdb").is_file() and (candidate / "pg_ctl").is_file():
            return candidate
    found = shutil.which("initdb")
    return Path(found).parent if found and shutil.which("pg_ctl") else None


def cluster_available() -> tuple[bool, str]:
    """Whether this machine can run a cluster of its own, and why not."""
    if _bin_dir() is None:
        return False, "PostgreSQL's initdb and pg_ctl are not installed (set PROVINGSITE_PG_BIN to their folder)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return False, "running as root and no postgres user to run the cluster as"
        if shutil.which("runuser") is None:
            return False, "running as root and no runuser to run the cluster as postgres"
    return True, ""


class Cluster:
    """One cluster: ``start``, ``restart``, ``stop``, ``destroy``; ``admin_url`` reaches it."""

    def __init__(self) -> None:
        bin_dir = _bin_dir()
        assert bin_dir is not None, cluster_available()[1]
        self.bin = bin_dir
        self.root = Path(tempfile.mkdtemp(prefix="pg-cluster-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = free_port()
        self.as_postgres = os.geteuid() == 0
        if self.as_postgres:
            owner = pwd.getpwnam("postgres")
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
        self.root.chmod(0o755)

    @property
    def admin_url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *argv: str, timeout: float = 60) -> None:
        command = [str(self.bin / argv[0]), *argv[1:]]
        if self.as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise FarmError(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout[-2000:]}\n"
                            f"{done.stderr[-2000:]}\n{self.server_log()}")

    def server_log(self, chars: int = 3000) -> str:
        with contextlib.suppress(OSError):
            return f"--- server log ---\n{self.log.read_text(errors='replace')[-chars:]}"
        return ""

    def create(self) -> Cluster:
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync",
                  timeout=120)
        with open(self.data / "postgresql.conf", "a") as conf:
            # Its own port and socket folder; fsync off: the test restarts it, it never crashes it.
            conf.write(f"\nport = {self.port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{self.root}'\n"
                       "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\nmax_connections = 200\n")
        return self.start()

    def start(self) -> Cluster:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start")
        wait_for(self.up, 30, "the cluster to accept connections", interval=0.05)
        return self

    def stop(self) -> None:
        """A fast shutdown: every session is ended at once, as in a restart."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t", "60", "stop")

    def restart(self, down_seconds: float) -> None:
        self.stop()
        time.sleep(down_seconds)
        self.start()

    def up(self) -> bool:
        try:
            psycopg.connect(self.admin_url, connect_timeout=2).close()
        except psycopg.Error:
            return False
        return True

    def destroy(self) -> None:
        with contextlib.suppress(FarmError, subprocess.TimeoutExpired):
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)

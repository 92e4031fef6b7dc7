"""A proving farm on one machine, made of the real pieces: PostgreSQL, Redis, several
``manage.py runengine`` processes (each its own "host"), a Daphne web front, and clients.

Used by the farm acceptance tests (``tests/farm/``) and by ``bench/farm.py``. Nothing here is
a fake: every process is the one an operator runs, started with the environment an operator
sets, and every check reads the records straight from PostgreSQL.

* :class:`FarmTemplate` migrates one PostgreSQL database once; every :class:`Farm` is a copy
  of it (``CREATE DATABASE … TEMPLATE``), so a fresh farm costs a fraction of a second.
* :func:`ensure_params` makes the tiny proving keys once into a shared params directory
  (``manage.py setupkeys --scale tiny``), before any engine starts, so engines never race.
* :class:`Farm` starts and stops engines and Daphne, submits jobs, reads rows, logs in.
* :class:`SseClient` reads ``/events/`` over a raw socket (chunked HTTP, SSE framing).
"""

from __future__ import annotations

import contextlib
import fcntl
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

REPO = Path(__file__).resolve().parents[2]
PYTHON = str(REPO / ".venv" / "bin" / "python")
MANAGE = str(REPO / "manage.py")
ENGINE_MANAGE = MANAGE

ADMIN_DATABASE_URL = os.environ.get("PROVINGSITE_TEST_POSTGRES", "postgres://postgres@127.0.0.1:5432/test")
REDIS_HOST = os.environ.get("PROVINGSITE_TEST_REDIS_HOST", "127.0.0.1")
REDIS_PORT = int(os.environ.get("PROVINGSITE_TEST_REDIS_PORT", "6379"))
PARAMS_DIR = Path(os.environ.get("PROVINGSITE_FARM_PARAMS_DIR", str(REPO / ".cache" / "farm-params")))

# Short beats so a lapsed lease is seen in seconds, not the production 15 s.
HEARTBEAT_SECONDS = 0.5
LEASE_SECONDS = 3.0
SECRET_KEY = "farm-tests-only-" + "x" * 40
KINDS = ("winning-post", "window-post", "porep-c2", "snap-update")
LIVE_STATES = ("reserving", "synthesizing", "synth_done", "gpu", "finalizing")


class FarmError(AssertionError):
    """Something in the farm did not happen in time; the message says what and shows logs."""


# ---- services --------------------------------------------------------------------------


def postgres_available() -> tuple[bool, str]:
    try:
        psycopg.connect(ADMIN_DATABASE_URL, connect_timeout=3).close()
    except Exception as exc:  # any failure means "not here"
        return False, f"PostgreSQL not reachable at {ADMIN_DATABASE_URL}: {exc}"
    return True, ""


def redis_available() -> tuple[bool, str]:
    try:
        with socket.create_connection((REDIS_HOST, REDIS_PORT), timeout=3) as s:
            s.sendall(b"PING\r\n")
            if not s.recv(16).startswith(b"+PONG"):
                return False, "Redis did not answer PING"
    except OSError as exc:
        return False, f"Redis not reachable at {REDIS_HOST}:{REDIS_PORT}: {exc}"
    return True, ""


def redis_command(*args: str, db: int = 0, timeout: float = 5.0) -> bytes:
    """One Redis command over RESP; returns the raw first reply line."""
    parts = [("SELECT", str(db)), args] if db else [args]
    payload = b""
    for cmd in parts:
        payload += f"*{len(cmd)}\r\n".encode() + b"".join(f"${len(a)}\r\n{a}\r\n".encode() for a in cmd)
    with socket.create_connection((REDIS_HOST, REDIS_PORT), timeout=timeout) as s:
        s.sendall(payload)
        data = b""
        while data.count(b"\r\n") < len(parts):
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    return data.split(b"\r\n")[len(parts) - 1]


def restart_redis(down_seconds: float = 1.0) -> None:
    """Stop Redis (no save) and start it again with the machine's usual flags."""
    subprocess.run(["redis-cli", "-p", str(REDIS_PORT), "shutdown", "nosave"], capture_output=True, timeout=10)
    deadline = time.monotonic() + 10
    while redis_available()[0]:
        if time.monotonic() > deadline:
            raise FarmError("Redis did not stop")
        time.sleep(0.1)
    time.sleep(down_seconds)
    subprocess.run(
        ["redis-server", "--daemonize", "yes", "--bind", "127.0.0.1", "-::1", "--port", str(REDIS_PORT),
         "--save", "", "--appendonly", "no", "--dir", "/var/lib/redis", "--logfile", "/var/log/redis/ci.log"],
        check=True, capture_output=True, timeout=10,
    )
    wait_for(lambda: redis_available()[0], 10, "Redis to come back")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.1,
             on_timeout: Callable[[], str] | None = None) -> Any:
    """Poll ``predicate`` until it returns something truthy; that value is returned."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            detail = on_timeout() if on_timeout else ""
            raise FarmError(f"timed out after {timeout:.0f} s waiting for {what}\n{detail}")
        time.sleep(interval)


def db_url(name: str, admin_url: str = ADMIN_DATABASE_URL) -> str:
    base, _, _ = admin_url.rpartition("/")
    return f"{base}/{name}"


def admin_execute(statement: sql.Composed, admin_url: str = ADMIN_DATABASE_URL) -> None:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(statement)


def drop_database(name: str, admin_url: str = ADMIN_DATABASE_URL) -> None:
    admin_execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)), admin_url)


def base_env() -> dict[str, str]:
    """The environment every farm process shares, minus the per-farm URLs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PROVINGSITE_", "DATABASE_URL", "REDIS_URL"))}
    env.update({
        "DJANGO_SETTINGS_MODULE": "provingsite.settings",
        "PYTHONUNBUFFERED": "1",
        "SECRET_KEY": SECRET_KEY,
        "LOG_LEVEL": "info",
        "PROVINGSITE_PARAMS_DIR": str(PARAMS_DIR),
        "PROVINGSITE_SCALE": "tiny",
        "PROVINGSITE_DEVICES": "cpu",
        "PROVINGSITE_HEARTBEAT_SECONDS": str(HEARTBEAT_SECONDS),
        "PROVINGSITE_LEASE_SECONDS": str(LEASE_SECONDS),
        "PROVINGSITE_MAX_ATTEMPTS": "5",
        "PROVINGSITE_DRAIN_SECONDS": "5",
        "PROVINGSITE_MEMORY_BUDGET": "4GiB",
        # Two cores for everything: one synthesis process and one worker per engine.
        "PROVINGSITE_SYNTHESIS_CONCURRENCY": "1",
        "PROVINGSITE_WORKERS_PER_DEVICE": "1",
    })
    if "PROVINGSITE_CACHE_DIR" in os.environ:  # compiled kernels are shared, not rebuilt
        env["PROVINGSITE_CACHE_DIR"] = os.environ["PROVINGSITE_CACHE_DIR"]
    return env


def run_manage(args: Sequence[str], env: dict[str, str], timeout: float = 300, stdin: str | None = None) -> str:
    proc = subprocess.run([PYTHON, MANAGE, *args], cwd=REPO, env=env, input=stdin, capture_output=True,
                          text=True, timeout=timeout)
    if proc.returncode != 0:
        raise FarmError(f"manage.py {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc.stdout


def ensure_params(env: dict[str, str] | None = None) -> Path:
    """Proving keys for scale tiny, made once into the shared params dir (locked: one maker)."""
    PARAMS_DIR.mkdir(parents=True, exist_ok=True)
    env = dict(env or base_env())
    env.setdefault("PROVINGSITE_DATA_DIR", str(PARAMS_DIR.parent / "farm-setup-data"))
    with open(PARAMS_DIR / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        # setupkeys skips keys that are present and checksummed, so this is cheap after once; it
        # records the keys' digests (FarmKey), so its database is migrated first.
        run_manage(["migrate", "--no-input", "-v", "0"], env)
        run_manage(["setupkeys", "--scale", "tiny"], env, timeout=900)
    return PARAMS_DIR


# ---- the database template -------------------------------------------------------------


class FarmTemplate:
    """One migrated database; farms are cheap copies of it. ``admin_url``: the server's (a
    database on it to connect to), the shared one unless a test brings a cluster of its own."""

    def __init__(self, tag: str = "", admin_url: str = ADMIN_DATABASE_URL) -> None:
        self.name = f"farm_tpl_{tag or os.getpid()}_{uuid.uuid4().hex[:6]}"
        self.counter = 0
        self.admin_url = admin_url

    def create(self) -> FarmTemplate:
        admin_execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(self.name)), self.admin_url)
        env = base_env() | {"DATABASE_URL": db_url(self.name, self.admin_url),
                            "PROVINGSITE_DATA_DIR": str(REPO / ".cache" / "farm-tpl")}
        try:
            run_manage(["migrate", "--no-input", "-v", "0"], env)
        except BaseException:
            drop_database(self.name, self.admin_url)
            raise
        return self

    def destroy(self) -> None:
        drop_database(self.name, self.admin_url)

    def clone(self) -> str:
        self.counter += 1
        name = f"{self.name.replace('farm_tpl_', 'farm_')}_{self.counter}"
        admin_execute(sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(name), sql.Identifier(self.name)),
                       self.admin_url)
        return name


# ---- processes -------------------------------------------------------------------------


@dataclass
class Process:
    """A child in its own process group; signals go to the whole group (engine + its pool)."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    stopped: bool = False

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, sig)

    def kill(self) -> None:
        """SIGKILL the whole group, as a crashed host would vanish."""
        self.signal(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(10)

    def pause(self) -> None:
        self.signal(signal.SIGSTOP)
        self.stopped = True

    def resume(self) -> None:
        self.signal(signal.SIGCONT)
        self.stopped = False

    def stop(self, timeout: float = 15) -> int | None:
        """SIGTERM (drain), then SIGKILL whatever is left of the group."""
        if self.stopped:
            self.resume()
        if self.alive():
            self.signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout)
        self.signal(signal.SIGKILL)  # stragglers of the group (pool children) too
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(5)
        return self.popen.returncode

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def tail(self, chars: int = 4000) -> str:
        return f"--- {self.name} log ({self.log_path}) ---\n{self.log()[-chars:]}"


@dataclass
class Daphne:
    process: Process
    port: int

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass
class Farm:
    """One farm: its database, its Redis db number, its processes, its clients."""

    database: str
    redis_db: int
    root: Path
    processes: list[Process] = field(default_factory=list)
    _session: str | None = None
    admin_url: str = ADMIN_DATABASE_URL

    # -- lifecycle ---------------------------------------------------------------------

    @classmethod
    def create(cls, template: FarmTemplate, root: Path, redis_db: int) -> Farm:
        farm = cls(database=template.clone(), redis_db=redis_db, root=root, admin_url=template.admin_url)
        root.mkdir(parents=True, exist_ok=True)
        (root / "logs").mkdir(exist_ok=True)
        redis_command("FLUSHDB", db=redis_db)
        return farm

    def destroy(self) -> None:
        # SIGTERM every process at once (each drains in parallel), then stop them in turn.
        for proc in self.processes:
            if proc.stopped:
                proc.resume()
            if proc.alive():
                proc.signal(signal.SIGTERM)
        for proc in reversed(self.processes):
            proc.stop(timeout=8)
        drop_database(self.database, self.admin_url)
        with contextlib.suppress(OSError):
            redis_command("FLUSHDB", db=self.redis_db)

    @property
    def database_url(self) -> str:
        return db_url(self.database, self.admin_url)

    @property
    def redis_url(self) -> str:
        return f"redis://{REDIS_HOST}:{REDIS_PORT}/{self.redis_db}"

    def env(self, data_dir: str = "web", **extra: str) -> dict[str, str]:
        path = self.root / "data" / data_dir
        path.mkdir(parents=True, exist_ok=True)
        return base_env() | {
            "DATABASE_URL": self.database_url,
            "REDIS_URL": self.redis_url,
            "PROVINGSITE_DATA_DIR": str(path),
        } | extra

    def manage(self, *args: str, timeout: float = 120, stdin: str | None = None) -> str:
        return run_manage(args, self.env(), timeout=timeout, stdin=stdin)

    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> Process:
        log_path = self.root / "logs" / f"{name}.log"
        log = open(log_path, "ab")  # noqa: SIM115 - the child owns it
        popen = subprocess.Popen(argv, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        proc = Process(name=name, popen=popen, log_path=log_path)
        self.processes.append(proc)
        return proc

    # -- engines -----------------------------------------------------------------------

    def start_engine(self, host_name: str, *extra_args: str, wait: bool = True, **env: str) -> Process:
        """``manage.py runengine --host-name NAME``; waits for its first heartbeat."""
        argv = [PYTHON, ENGINE_MANAGE, "runengine", "--host-name", host_name, *extra_args]
        # application_name: the host's sessions are recognisable in pg_stat_activity.
        env = {"DATABASE_URL": f"{self.database_url}?application_name={host_name}", **env}
        proc = self._spawn(host_name, argv, self.env(data_dir=host_name, PROVINGSITE_HOST_NAME=host_name, **env))
        if wait:
            self.wait_engine_ready(proc)
        return proc

    def start_engines(self, *host_names: str, **env: str) -> list[Process]:
        """Several hosts started side by side (start-up is mostly imports: overlap it)."""
        procs = [self.start_engine(name, wait=False, **env) for name in host_names]
        for proc in procs:
            self.wait_engine_ready(proc)
        return procs

    def wait_engine_ready(self, proc: Process, timeout: float = 90) -> None:
        started = time.time()

        def ready() -> bool:
            if not proc.alive():
                raise FarmError(f"engine {proc.name} exited with {proc.popen.returncode}\n{proc.tail()}")
            # Registered, its worker slots written, and a beat through its status writer.
            row = self.one("SELECT h.heartbeat_at, h.stopped_at, h.version, count(w.id) AS workers "
                           "FROM engine_enginehost h LEFT JOIN engine_worker w ON w.host_id = h.id "
                           "WHERE h.name = %s GROUP BY h.id", proc.name)
            return bool(row and row["heartbeat_at"] and row["heartbeat_at"].timestamp() >= started - 1
                        and row["stopped_at"] is None and row["version"] > 0 and row["workers"] > 0)

        wait_for(ready, timeout, f"engine {proc.name} to heartbeat", interval=0.2, on_timeout=proc.tail)

    def engine(self, name: str) -> Process:
        return next(p for p in self.processes if p.name == name)

    # -- web ---------------------------------------------------------------------------

    def start_daphne(self) -> Daphne:
        port = free_port()
        # The documented web front: Daphne with request bodies bounded at header time.
        argv = [PYTHON, "-m", "provingsite.server", "-b", "127.0.0.1", "-p", str(port)]
        proc = self._spawn(f"daphne-{port}", argv, self.env())

        def listening() -> bool:
            if not proc.alive():
                raise FarmError(f"daphne exited with {proc.popen.returncode}\n{proc.tail()}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
            return False

        wait_for(listening, 60, "daphne to listen", interval=0.2, on_timeout=proc.tail)
        return Daphne(process=proc, port=port)

    def session_cookie(self) -> str:
        """A logged-in superuser's session id (made once per farm)."""
        if self._session is None:
            code = (
                "from django.contrib.auth import get_user_model\n"
                "from django.test import Client\n"
                "u, _ = get_user_model().objects.get_or_create(username='farm', defaults={'is_superuser': True, 'is_staff': True})\n"
                "c = Client()\n"
                "c.force_login(u)\n"
                "print('SESSION=' + c.cookies['sessionid'].value)\n"
            )
            out = self.manage("shell", "-c", code)
            match = re.search(r"SESSION=(\w+)", out)
            if not match:
                raise FarmError(f"no session id in: {out}")
            self._session = match.group(1)
        return self._session

    def get_page(self, daphne: Daphne, path: str = "/", timeout: float = 15) -> tuple[int, str]:
        conn = http.client.HTTPConnection("127.0.0.1", daphne.port, timeout=timeout)
        try:
            conn.request("GET", path, headers={"Cookie": f"sessionid={self.session_cookie()}"})
            resp = conn.getresponse()
            return resp.status, resp.read().decode(errors="replace")
        finally:
            conn.close()

    def sse(self, daphne: Daphne, last_event_id: str | None = None) -> SseClient:
        client = SseClient("127.0.0.1", daphne.port, "/events/", cookie=f"sessionid={self.session_cookie()}",
                           last_event_id=last_event_id)
        client.start()
        return client

    # -- jobs --------------------------------------------------------------------------

    def submit(self, jobs: Sequence[tuple[str, str, dict[str, Any]]], priority: int | None = None) -> list[str]:
        """Submit (kind, job_id, raw inputs) through validate_inputs + submit_job, in one process;
        at ``priority`` if given, else each kind's own."""
        code = (
            "import json, sys\n"
            "from engine.circuits.kinds import validate_inputs\n"
            "from engine.ledger.jobs import submit_job\n"
            f"for kind, job_id, raw in json.loads({json.dumps(json.dumps(list(jobs)))}):\n"
            "    inputs, n = validate_inputs(kind, raw)\n"
            "    job, created = submit_job(kind=kind, job_id=job_id, inputs=inputs, num_partitions=n,\n"
            f"                              circuit_id=f'{{kind}}/tiny', scale='tiny', priority={priority!r})\n"
            "    print('SUBMITTED', job.job_id, n, created)\n"
        )
        out = self.manage("shell", "-c", code)
        submitted = re.findall(r"SUBMITTED (\S+)", out)
        if len(submitted) != len(jobs):
            raise FarmError(f"submitted {len(submitted)} of {len(jobs)}: {out}")
        return submitted

    # -- records -----------------------------------------------------------------------

    @contextlib.contextmanager
    def connect(self) -> Iterator[psycopg.Connection[dict[str, Any]]]:
        with psycopg.connect(self.database_url, autocommit=True, row_factory=dict_row) as conn:
            yield conn

    def rows(self, query: str, *params: Any) -> list[dict[str, Any]]:
        with self.connect() as conn:
            return list(conn.execute(query, params or None).fetchall())

    def one(self, query: str, *params: Any) -> dict[str, Any] | None:
        found = self.rows(query, *params)
        return found[0] if found else None

    def value(self, query: str, *params: Any) -> Any:
        """The first column of the query's first row, which it must have."""
        row = self.one(query, *params)
        assert row is not None, f"no row for {query}"
        return next(iter(row.values()))

    def jobs(self, job_ids: Sequence[str]) -> list[dict[str, Any]]:
        return self.rows("SELECT * FROM engine_proofjob WHERE job_id = ANY(%s) ORDER BY job_id", list(job_ids))

    def partitions(self, job_ids: Sequence[str]) -> list[dict[str, Any]]:
        return self.rows(
            "SELECT p.*, j.job_id AS job_name, h.name AS host_name FROM engine_partition p "
            "JOIN engine_proofjob j ON j.id = p.job_id LEFT JOIN engine_enginehost h ON h.id = p.host_id "
            "WHERE j.job_id = ANY(%s) ORDER BY j.job_id, p.index", list(job_ids))

    def live_partitions_of(self, host_name: str) -> list[dict[str, Any]]:
        return self.rows(
            "SELECT p.*, j.job_id AS job_name FROM engine_partition p JOIN engine_proofjob j ON j.id = p.job_id "
            "JOIN engine_enginehost h ON h.id = p.host_id "
            "WHERE h.name = %s AND p.state = ANY(%s) AND p.lease_expires_at > now() ORDER BY p.id",
            host_name, list(LIVE_STATES))

    def open_transactions(self, host_name: str) -> list[dict[str, Any]]:
        """The host's database sessions with a transaction open, and the tables they locked."""
        return self.rows(
            "SELECT a.pid, a.state, a.xact_start, a.query, array_remove(array_agg(DISTINCT c.relname::text), NULL) AS tables "
            "FROM pg_stat_activity a LEFT JOIN pg_locks l ON l.pid = a.pid AND l.locktype = 'relation' "
            "AND l.mode = 'RowExclusiveLock' LEFT JOIN pg_class c ON c.oid = l.relation "
            "WHERE a.datname = %s AND a.application_name = %s AND a.xact_start IS NOT NULL "
            "GROUP BY a.pid, a.state, a.xact_start, a.query", self.database, host_name)

    def pause_outside_transaction(self, proc: Process, tries: int = 100) -> None:
        """SIGSTOP the host at a moment it holds no open transaction (so no row locks)."""
        for _ in range(tries):
            proc.pause()
            time.sleep(0.15)
            if not self.open_transactions(proc.name):
                return
            proc.resume()
            time.sleep(0.03)
        raise FarmError(f"{proc.name} was inside a transaction every time it was paused")

    def pause_inside_transaction(self, proc: Process, table: str, tries: int = 300) -> dict[str, Any]:
        """SIGSTOP the host at a moment it has a transaction open that wrote ``table``."""
        for _ in range(tries):
            proc.pause()
            time.sleep(0.05)
            for tx in self.open_transactions(proc.name):
                if table in tx["tables"]:
                    return tx
            proc.resume()
            time.sleep(0.01)
        raise FarmError(f"{proc.name} was never caught inside a transaction writing {table}")

    def host(self, name: str) -> dict[str, Any] | None:
        return self.one("SELECT * FROM engine_enginehost WHERE name = %s", name)

    def wait_jobs_finished(self, job_ids: Sequence[str], timeout: float, *, watch: Sequence[Process] = ()) -> None:
        def finished() -> bool:
            for proc in watch:
                if not proc.stopped and not proc.alive():
                    raise FarmError(f"{proc.name} died ({proc.popen.returncode})\n{proc.tail()}")
            states = [j["state"] for j in self.rows(
                "SELECT state FROM engine_proofjob WHERE job_id = ANY(%s)", list(job_ids))]
            return len(states) == len(job_ids) and all(s in ("done", "failed", "cancelled") for s in states)

        def report() -> str:
            counts = self.rows(
                "SELECT j.job_id, j.state AS job_state, p.state, count(*) AS n FROM engine_partition p "
                "JOIN engine_proofjob j ON j.id = p.job_id WHERE j.job_id = ANY(%s) GROUP BY 1, 2, 3 ORDER BY 1",
                list(job_ids))
            return "\n".join(str(c) for c in counts) + "\n" + "\n".join(p.tail(2500) for p in self.processes)

        wait_for(finished, timeout, f"{len(job_ids)} jobs to finish", interval=0.3, on_timeout=report)


def inputs_for(kind: str, n: int, partitions: int = 2) -> dict[str, Any]:
    """Distinct, valid raw inputs for job ``n`` of ``kind``."""
    seed = f"{KINDS.index(kind):02x}{n:06x}".ljust(64, "a")
    rand = f"{n:08x}".ljust(64, "5")
    raw: dict[str, Any] = {"sector_seed": seed, "randomness": rand}
    if kind == "snap-update":
        raw["data_seed"] = f"{n:08x}".ljust(64, "d")
    if kind == "window-post":
        raw["partitions"] = partitions
    return raw


def batch(prefix: str, counts: dict[str, int], window_partitions: int = 2) -> list[tuple[str, str, dict[str, Any]]]:
    """Jobs named ``{prefix}-{kind}-{i}``; full ids, never truncated."""
    out = []
    for kind, count in counts.items():
        for i in range(count):
            out.append((kind, f"{prefix}-{kind}-{i}", inputs_for(kind, i, window_partitions)))
    return out


# ---- server-sent events ----------------------------------------------------------------


@dataclass
class SseEvent:
    event: str
    data: str
    id: str | None
    received_at: float


class SseClient:
    """``GET /events/`` on a raw socket in a thread: status, headers, chunked body, SSE frames."""

    def __init__(self, host: str, port: int, path: str, cookie: str, last_event_id: str | None = None) -> None:
        self.host, self.port, self.path, self.cookie, self.last_event_id = host, port, path, cookie, last_event_id
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.events: list[SseEvent] = []
        self.comments: list[str] = []
        self.retry: int | None = None
        self.closed = threading.Event()
        self.error: BaseException | None = None
        self._cond = threading.Condition()
        self._sock: socket.socket | None = None
        self._thread = threading.Thread(target=self._run, name="sse-client", daemon=True)

    def start(self) -> SseClient:
        self._thread.start()
        return self

    def close(self) -> None:
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                self._sock.close()
        self._thread.join(5)

    def __enter__(self) -> SseClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def wait(self, predicate: Callable[[list[SseEvent]], Any], timeout: float, what: str) -> Any:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                value = predicate(list(self.events))
                if value:
                    return value
                left = deadline - time.monotonic()
                if left <= 0 or (self.closed.is_set() and not value):
                    tail = "\n".join(f"[{e.id}] {e.event}: {e.data[:300]}" for e in self.events[-5:])
                    raise FarmError(f"SSE: timed out waiting for {what} (status {self.status}, "
                                    f"{len(self.events)} events, closed={self.closed.is_set()}, "
                                    f"error={self.error!r})\n{tail}")
                self._cond.wait(min(left, 0.5))

    def text(self) -> str:
        with self._cond:
            return "\n".join(e.data for e in self.events)

    # -- the reader --------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._sock = socket.create_connection((self.host, self.port), timeout=10)
            self._sock.settimeout(None)
            lines = [f"GET {self.path} HTTP/1.1", f"Host: {self.host}:{self.port}", "Accept: text/event-stream",
                     "Cache-Control: no-cache", f"Cookie: {self.cookie}"]
            if self.last_event_id is not None:
                lines.append(f"Last-Event-ID: {self.last_event_id}")
            self._sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
            reader = self._sock.makefile("rb")
            status_line = reader.readline().decode("latin-1")
            self.status = int(status_line.split()[1])
            while (line := reader.readline().decode("latin-1").rstrip("\r\n")):
                name, _, value = line.partition(":")
                self.headers[name.strip().lower()] = value.strip()
            chunked = "chunked" in self.headers.get("transfer-encoding", "").lower()
            self._parse(self._body(reader, chunked))
        except (OSError, ValueError) as exc:
            self.error = exc
        finally:
            self.closed.set()
            with self._cond:
                self._cond.notify_all()

    @staticmethod
    def _body(reader: Any, chunked: bool) -> Iterator[bytes]:
        if not chunked:
            while chunk := reader.read1(65536):
                yield chunk
            return
        while True:
            size_line = reader.readline()
            if not size_line:
                return
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                return
            yield reader.read(size)
            reader.readline()  # CRLF after the chunk

    def _parse(self, chunks: Iterator[bytes]) -> None:
        buffer = ""
        event, event_id = "message", None
        data: list[str] = []
        for chunk in chunks:
            buffer += chunk.decode("utf-8", errors="replace")
            buffer = buffer.replace("\r\n", "\n").replace("\r", "\n")
            while "\n" in buffer:
                line, buffer = buffer.split("\n", 1)
                if line == "":
                    if data:
                        with self._cond:
                            self.events.append(SseEvent(event, "\n".join(data), event_id, time.time()))
                            self._cond.notify_all()
                    event, data = "message", []
                    continue
                if line.startswith(":"):
                    self.comments.append(line[1:].strip())
                    continue
                name, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if name == "data":
                    data.append(value)
                elif name == "event":
                    event = value
                elif name == "id":
                    event_id = value
                elif name == "retry" and value.isdigit():
                    self.retry = int(value)


# ---- what "completed exactly once" means --------------------------------------------------


def completion_problems(farm: Farm, job_ids: Sequence[str]) -> list[str]:
    """Every way the jobs fall short of "done once, one proof per partition"; empty if none."""
    problems: list[str] = []
    jobs = {j["job_id"]: j for j in farm.jobs(job_ids)}
    parts_by_job: dict[str, list[dict[str, Any]]] = {}
    for p in farm.partitions(job_ids):
        parts_by_job.setdefault(p["job_name"], []).append(p)
    for job_id in job_ids:
        job = jobs.get(job_id)
        if job is None:
            problems.append(f"{job_id}: missing")
            continue
        n = job["num_partitions"]
        parts = parts_by_job.get(job_id, [])
        if job["state"] != "done":
            problems.append(f"{job_id}: state {job['state']} ({job['error']})")
        if not job["verified"]:
            problems.append(f"{job_id}: not verified")
        indexes = [p["index"] for p in parts]
        if sorted(indexes) != list(range(n)):
            problems.append(f"{job_id}: partition indexes {indexes}, expected 0..{n - 1}")
        for p in parts:
            if p["state"] != "done" or p["proof"] is None or p["finished_at"] is None:
                problems.append(f"{job_id} P{p['index']}: state {p['state']}, proof {p['proof'] is not None}")
        proof = job["proof"]
        if not isinstance(proof, list) or len(proof) != n:
            problems.append(f"{job_id}: job proof has {len(proof) if isinstance(proof, list) else proof!r} entries, expected {n}")
        else:
            blobs = [json.dumps(x, sort_keys=True) for x in proof]
            if len(set(blobs)) != n:
                problems.append(f"{job_id}: the job proof holds a partition's proof twice")
            for p in parts:
                if p["proof"] is not None and p["index"] < n and json.dumps(p["proof"], sort_keys=True) != blobs[p["index"]]:
                    problems.append(f"{job_id} P{p['index']}: job proof entry differs from the partition's proof")
    return problems

"""A newcomer's first run, timed: a fresh clone, then `bin/run` until the console answers and
until the first proof is recorded, with empty caches (nothing downloaded before, no uv) and
again with warm ones (a second clone on the same machine).

    python3 bench/first_run.py                 # cold, then warm
    python3 bench/first_run.py --runs warm     # warm only (the caches as this user has them)

Cold runs point XDG_CACHE_HOME (uv, pip and provingsite's fetched uv) and PIP_CACHE_DIR at an
empty folder; a warm run uses the folder the cold run filled, or, with --runs warm alone, this
user's own caches. PYTHONDONTWRITEBYTECODE is removed from the child's environment, as a user
has it; LOG_LEVEL=debug is set, for the line that says a proof was recorded. The clone is of
this checkout's HEAD.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIRST_PROOF = re.compile(r"engine\.progress: proved P\d+ of ")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def one_run(cache: Path | None, timeout: float) -> dict[str, float]:
    """Seconds from the start of bin/run in a fresh clone to the console and to the first proof."""
    work = Path(tempfile.mkdtemp(prefix="first-run-"))
    try:
        started = time.monotonic()
        subprocess.run(["git", "clone", "--quiet", str(REPO), str(work / "repo")], check=True)
        clone_s = time.monotonic() - started
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "VIRTUAL_ENV")}
        env = {k: v for k, v in env.items() if not k.startswith(("PROVINGSITE_", "UV_")) and k != "DATABASE_URL"}
        env["LOG_LEVEL"] = "debug"  # the engine's own log says "proved" at debug only
        if cache is not None:
            env.update(XDG_CACHE_HOME=str(cache), PIP_CACHE_DIR=str(cache / "pip"))
        port = free_port()
        log = (work / "run.log").open("w")
        started = time.monotonic()
        run = subprocess.Popen(["bash", "bin/run", "--port", str(port)], cwd=work / "repo", env=env, stdout=log,
                               stderr=subprocess.STDOUT, start_new_session=True)
        figures = {"clone": clone_s}
        try:
            while time.monotonic() - started < timeout and run.poll() is None:
                now = time.monotonic() - started
                if "console" not in figures and answers(f"http://127.0.0.1:{port}/login/"):
                    figures["console"] = now
                if "first proof" not in figures and FIRST_PROOF.search((work / "run.log").read_text()):
                    figures["first proof"] = now
                if len(figures) == 3:
                    break
                time.sleep(0.1)
        finally:
            os.killpg(run.pid, signal.SIGINT)
            try:
                run.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(run.pid, signal.SIGKILL)
            log.close()
        if len(figures) < 3:
            print((work / "run.log").read_text()[-3000:], file=sys.stderr)
            raise SystemExit(f"bin/run did not reach the console and a proof within {timeout:.0f} s")
        return figures
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", nargs="+", choices=("cold", "warm"), default=["cold", "warm"])
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a run may take (default 300)")
    args = parser.parse_args()
    caches = Path(tempfile.mkdtemp(prefix="first-run-caches-"))
    rows = []
    try:
        for kind in args.runs:
            cache: Path | None = caches
            if kind == "warm" and "cold" not in args.runs:
                cache = None  # this user's own caches
            print(f"{kind} run …", flush=True)
            figures = one_run(cache, args.timeout)
            rows.append((kind, figures))
            print(f"  clone {figures['clone']:.1f} s, bin/run → console {figures['console']:.1f} s, "
                  f"→ first proof {figures['first proof']:.1f} s", flush=True)
    finally:
        shutil.rmtree(caches, ignore_errors=True)
    print("\n| run | clone (s) | bin/run → console (s) | bin/run → first proof (s) |\n|---|---|---|---|")
    for kind, f in rows:
        print(f"| {kind} | {f['clone']:.1f} | {f['console']:.1f} | {f['first proof']:.1f} |")
    print(f"\nload average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()

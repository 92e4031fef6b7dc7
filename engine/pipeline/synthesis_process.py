"""What runs inside the synthesis pool's processes.

Kept apart from engine.pipeline.synthesize (which imports the models) because a spawned process
unpickles the function before its initializer has set Django up: this module must import
with nothing but the standard library at the top.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
ORPHAN_POLL_SECONDS = 0.5


def init_worker(engine_pid: int, kernel_tied: bool, nice: int = 0) -> None:
    """Pool processes are spawned (never forked from a threaded engine): set Django up.

    A pool process blocks on a queue it holds both ends of, so nothing tells it when the engine
    is killed (kill -9 runs no shutdown): it must watch for that itself, before anything slow.
    It runs ``nice`` lower than the engine, whose threads then get a core first.
    """
    die_with(engine_pid, kernel_tied)
    if nice:
        try:
            os.nice(nice)
        except OSError:
            pass
    # Ctrl-C reaches the terminal's whole process group; the engine stops its pool itself, so
    # a worker taking the SIGINT only printed a KeyboardInterrupt traceback per process.
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "provingsite.settings")
    django.setup()
    from engine.circuits.synthesis import configure_worker

    configure_worker(1)  # one native product thread per process: the pool's size is the parallelism


def serve(conn: Any, engine_pid: int, kernel_tied: bool, nice: int = 0) -> None:
    """A synthesis process's life (engine.pipeline.process_slot): set up, then run each call
    the engine sends and send back (True, its result) or (False, what it raised), until told
    to stop (None) or the engine is gone."""
    init_worker(engine_pid, kernel_tied, nice)
    while True:
        try:
            call = conn.recv()
        except (EOFError, OSError):
            return
        if call is None:
            return
        fn, args = call
        try:
            answer: tuple[bool, Any] = (True, fn(*args))
        except BaseException as exc:  # noqa: BLE001 - the engine's to judge, as the pool's was
            answer = (False, exc)
        try:
            conn.send(answer)
        except Exception as exc:  # noqa: BLE001 - a result or an error that does not pickle
            conn.send((False, RuntimeError(f"{type(exc).__name__}: {exc} (sending back {fn.__name__}'s answer)")))


def die_with(engine_pid: int, kernel_tied: bool) -> None:
    """End this process when the engine ends, however it ends.

    The kernel's death signal is immediate but Linux-only, and it fires when the *thread* that
    spawned us exits, so the engine asks for it only when it spawns from its main thread. The
    parent-pid check closes the window where the engine died before the signal was armed; the
    watcher thread is the portable path and the backstop.
    """
    if kernel_tied:
        _arm_death_signal()
    if os.getppid() != engine_pid:
        os._exit(1)
    threading.Thread(target=_exit_when_orphaned, args=(engine_pid,), name="orphan-watch", daemon=True).start()


def _arm_death_signal() -> None:
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        pass  # the watcher thread still ends us, half a second later


def _exit_when_orphaned(engine_pid: int) -> None:
    while os.getppid() == engine_pid:
        time.sleep(ORPHAN_POLL_SECONDS)
    os._exit(1)


def synthesize_builtin(circuit_id: str, inputs: dict[str, Any], index: int, spec: Any) -> Any:
    """The partition's assignment, written into the blocks the engine made for it
    (engine.pipeline.handover.BlockSpec); what was written, and the seconds it took."""
    from engine.circuits.compiled import keep_only
    from engine.circuits.kinds import parse_circuit_id
    from engine.circuits.synthesis import partition_rows, synthesize_partition_into
    from engine.pipeline.handover import Written, views

    started = time.perf_counter()
    # The engine reserves one circuit's compiled matrices per process: drop any other first.
    keep_only(parse_circuit_id(circuit_id))
    n_vars, n = partition_rows(circuit_id)
    # The kernels write the witness and A·w, B·w, C·w straight into the engine's blocks.
    assignment = synthesize_partition_into(circuit_id, inputs, index, *views(spec, n_vars, n))
    seconds = time.perf_counter() - started
    curve, n_public = assignment.curve, int(assignment.n_public)
    del assignment  # the last views: a block the pool did not lend is unmapped here
    _trim()  # the witness's intermediates, freed: what the process keeps is what the engine reserved for it
    return Written(curve=curve, n_vars=n_vars, n_constraints=n, n_public=n_public, seconds=seconds,
                   finished_at=time.time())


def load_circuit(circuit_id: str) -> float:
    """Hold ``circuit_id``'s compiled matrices (and no other circuit's): read from the cache, or
    compiled into it first (engine.circuits.compiled). Seconds taken."""
    from engine.circuits.compiled import compiled, keep_only
    from engine.circuits.kinds import parse_circuit_id

    started = time.perf_counter()
    shape = parse_circuit_id(circuit_id)
    keep_only(shape)
    _trim()
    compiled(shape)
    return time.perf_counter() - started


def drop_circuits() -> None:
    """Drop every compiled circuit this process holds (the engine then gives their bytes back)."""
    from engine.circuits.compiled import keep_only

    keep_only(None)
    _trim()


def synthesize_circom(upload_dir: str, memory_limit: int, witness_seconds: float, spec: Any) -> Any:
    """A circom circuit's assignment from its witness, written into the partition's blocks: the
    client's snarkjs witness, or the one its generator (the client's .wasm) computes here from
    the request's inputs, with at most ``memory_limit`` bytes of wasm memory (what the
    partition reserved), an instruction budget for the circuit's size and ``witness_seconds``
    of time. A generator that traps, fails an assertion or runs past a budget raises
    WitnessError with its own message (not retried)."""
    from pathlib import Path

    from engine.circuits import job_folder
    from engine.pipeline.handover import write
    from engine.prover import assignment_from_witness
    from engine.prover.snarkjs import read_zkey_constraints

    started = time.perf_counter()
    folder = Path(upload_dir)
    # Only the matrices: the points are the prover's, read once per job in reserve.
    constraints = read_zkey_constraints(folder / job_folder.ZKEY)
    witness = _circom_witness(folder, constraints, memory_limit, witness_seconds)
    assignment = assignment_from_witness(constraints, witness)
    del constraints, witness
    written = write(spec, assignment, time.perf_counter() - started)
    del assignment
    _trim()
    return written


def _circom_witness(folder: Any, constraints: Any, memory_limit: int, witness_seconds: float) -> Any:
    """The client's witness, or its generator's from the request's inputs (whose Python values
    are freed when this returns)."""
    import json

    from engine.circuits import job_folder
    from engine.prover import read_wtns
    from engine.prover.formats.wasm_witness import WitnessError, calculate_witness, fuel_for, witness_array

    if not job_folder.from_inputs(folder):
        return read_wtns(folder / job_folder.WTNS, constraints.curve)
    inputs = json.loads((folder / job_folder.INPUTS).read_text())
    values = calculate_witness((folder / job_folder.WASM).read_bytes(), inputs, fuel=fuel_for(constraints.n_vars),
                               memory=memory_limit, seconds=witness_seconds)
    if len(values) != constraints.n_vars:
        raise WitnessError(None, f"the .wasm computes {len(values)} signals; the zkey has {constraints.n_vars}")
    return witness_array(values)


def _trim() -> None:
    """Freed memory back to the system once a partition is written out: the engine reserves
    what a process keeps, and the heap would keep it."""
    from engine.pipeline.memory import release_freed_memory

    release_freed_memory()


def nothing() -> None:
    """Submitted once per process at start, so every process is up before work arrives."""

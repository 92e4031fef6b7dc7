"""A circom witness from the circuit's compiled ``.wasm`` and a dict of input signals.

circom 2 compiles each circuit's witness generator to WebAssembly with a small calling
convention: a signal is addressed by the 64-bit FNV-1a hash of its name, field elements
travel through a shared buffer as little-endian 32-bit words, and a failed ``===``/assert
traps after calling the host's ``exceptionHandler``. This module drives that interface with
wasmtime; it imports nothing from Django so the CLI and tests can call it directly.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import wasmtime

_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_MASK64 = (1 << 64) - 1
# The .wasm is the client's code: it runs on a budget of instructions (wasmtime fuel), of
# linear memory and of wall-clock time, so a circuit that loops or grows without end is
# refused, not left running. Witnesses are computed in the engine's synthesis processes, with
# the partition's reserved memory and a fuel budget for the circuit's size (fuel_for); the
# requests that register a circuit or take its inputs only probe it (PROBE_*), never run it,
# and do so in a child process with a time and memory limit (engine.prover.formats.wasm_probe).
DEFAULT_FUEL = 1 << 40
DEFAULT_MEMORY = 8 << 30
FUEL_BASE = 1_000_000_000
FUEL_PER_SIGNAL = 1_000_000  # a field operation in wasm is hundreds of instructions; ample
PROBE_FUEL = 10_000_000
PROBE_MEMORY = 256 << 20
# circom's runtime error codes, as its exceptionHandler receives them.
_CODES = {
    1: "signal not found",
    2: "too many values for the signal",
    3: "signal already set",
    4: "an assertion in the circuit failed",
    5: "the witness generator ran out of memory",
    6: "an input signal array access exceeds its size",
}


class WitnessError(ValueError):
    """Inputs the circuit refuses; ``signal`` names the input at fault when one is known."""

    def __init__(self, signal: str | None, message: str) -> None:
        super().__init__(f"{signal}: {message}" if signal else message)
        self.signal = signal
        self.message = message

    def __reduce__(self) -> tuple[Any, tuple[str | None, str]]:
        # raised in a synthesis process, it travels back to the engine by pickle
        return (WitnessError, (self.signal, self.message))


def fnv1a64(name: str) -> int:
    h = _FNV_OFFSET
    for byte in name.encode():
        h = ((h ^ byte) * _FNV_PRIME) & _MASK64
    return h


def _flatten(name: str, value: Any) -> Iterator[Any]:
    if isinstance(value, list | tuple):
        for item in value:
            yield from _flatten(name, item)
    else:
        yield value


def _field_value(signal: str, value: Any, prime: int) -> int:
    """An input as a field element: integers or decimal/hex strings, |value| below the prime."""
    if isinstance(value, bool):
        raise WitnessError(signal, "must be a number, not a boolean")
    if isinstance(value, int):
        number = value
    elif isinstance(value, str):
        try:
            number = int(value.strip(), 0)
        except ValueError:
            raise WitnessError(signal, f"{value!r} is not an integer") from None
    else:
        raise WitnessError(signal, f"must be an integer or a decimal string, not {type(value).__name__}")
    if not -prime < number < prime:
        raise WitnessError(signal, "is outside the circuit's field")
    return number % prime


# The witness copied out in one call: a loop in wasm over the generator's getWitness, each value
# (n32 words) copied from its shared buffer into pages grown at the end of its memory. Read
# from Python, a value costs 1 + n32 calls through wasmtime (about 60 µs each): 16 s for the
# witness of a 63,000-signal circuit, where its computation takes milliseconds.
_DUMP_WAT = """(module
  (import "circuit" "memory" (memory 0))
  (import "circuit" "getWitness" (func $get (param i32)))
  (import "circuit" "getSharedRWMemoryStart" (func $start (result i32)))
  (func (export "dump") (param $n i32) (param $words i32) (result i32)
    (local $size i32) (local $old i32) (local $dst i32) (local $src i32) (local $i i32)
    (local.set $size (i32.mul (local.get $words) (i32.const 4)))
    (local.set $old (memory.grow (i32.shr_u (i32.add (i32.mul (local.get $n) (local.get $size)) (i32.const 65535))
                                            (i32.const 16))))
    (if (i32.eq (local.get $old) (i32.const -1)) (then (return (i32.const -1))))
    (local.set $dst (i32.shl (local.get $old) (i32.const 16)))
    (local.set $src (call $start))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (call $get (local.get $i))
        (memory.copy (i32.add (local.get $dst) (i32.mul (local.get $i) (local.get $size)))
                     (local.get $src) (local.get $size))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (local.get $dst)))"""


class _Abort(Exception):
    """Raised from the host's exceptionHandler: unwinds the wasm call, as circom's JS throw does."""


def _export(instance: wasmtime.Instance, store: wasmtime.Store, name: str) -> wasmtime.Func:
    """The function the module exports as ``name`` (KeyError when it exports none; TypeError
    when that export is a memory, table or global, as calling it would raise)."""
    func = instance.exports(store)[name]
    if not isinstance(func, wasmtime.Func):
        raise TypeError(f"the module's export {name!r} is not a function")
    return func


class _Runtime:
    """The host side of circom's imports: collects the messages a failing circuit prints."""

    def __init__(self) -> None:
        self.code = 0
        self.messages: list[str] = []
        self.instance: wasmtime.Instance | None = None
        self.store: wasmtime.Store | None = None

    def _read_message(self) -> str:
        assert self.instance is not None and self.store is not None
        get_char = _export(self.instance, self.store, "getMessageChar")
        chars = []
        while (c := get_char(self.store)) != 0:
            chars.append(chr(c))
        return "".join(chars)

    def exception(self, code: int) -> None:
        self.code = code
        raise _Abort(code)

    def print_error(self) -> None:
        self.messages.append(self._read_message())

    def write_buffer(self) -> None:
        self._read_message()  # log() output from the circuit: drained, not needed

    def show_memory(self) -> None:
        pass


class _Calculator:
    def __init__(self, wasm_bytes: bytes, fuel: int = DEFAULT_FUEL, memory: int = DEFAULT_MEMORY,
                 seconds: float | None = None, probing: bool = False) -> None:
        self.runtime = _Runtime()
        config = wasmtime.Config()
        config.consume_fuel = True
        config.epoch_interruption = seconds is not None
        if probing:
            # A probe calls a few table lookups: optimising the whole module is wasted work (a 27 MB
            # module compiles in a fifth of the time unoptimised), and one thread compiles it. Its
            # memory is reserved as it grows, so an address-space limit (the probe's process) holds.
            config.cranelift_opt_level = "none"
            config.parallel_compilation = False
            config.memory_reservation = 0
            config.memory_reservation_for_growth = 1 << 20
            config.memory_guard_size = 0
        engine = self.engine = wasmtime.Engine(config)
        self.store = wasmtime.Store(engine)
        self.store.set_fuel(fuel)
        self.store.set_limits(memory_size=memory)
        self.seconds = seconds
        self.timed_out = threading.Event()
        self._timer: threading.Timer | None = None
        if seconds is not None:
            # past the deadline the next epoch check traps, wherever the generator is
            self.store.set_epoch_deadline(1)

            def expire() -> None:
                self.timed_out.set()
                engine.increment_epoch()

            self._timer = threading.Timer(seconds, expire)
            self._timer.daemon = True
            self._timer.start()
        module = wasmtime.Module(engine, wasm_bytes)
        linker = wasmtime.Linker(engine)
        rt = self.runtime
        i32: list[wasmtime.ValType] = [wasmtime.ValType.i32()]
        none: list[wasmtime.ValType] = []
        linker.define_func("runtime", "exceptionHandler", wasmtime.FuncType(i32, none), rt.exception)
        linker.define_func("runtime", "printErrorMessage", wasmtime.FuncType(none, none), rt.print_error)
        linker.define_func("runtime", "writeBufferMessage", wasmtime.FuncType(none, none), rt.write_buffer)
        linker.define_func("runtime", "showSharedRWMemory", wasmtime.FuncType(none, none), rt.show_memory)
        self.instance = linker.instantiate(self.store, module)
        rt.instance, rt.store = self.instance, self.store
        self.n32 = self.call("getFieldNumLen32")
        self.call("getRawPrime")
        self.prime = self.read_shared()
        # where the shared buffer lies in the exported memory, written in one call (else by words)
        exported = self.instance.exports(self.store).get("memory")
        try:
            start = self.call("getSharedRWMemoryStart")
        except KeyError:
            start = None
        self.shared = (exported, start & 0xFFFFFFFF) if isinstance(exported, wasmtime.Memory) and start is not None \
            else None

    def call(self, name: str, *args: int) -> int:
        return _export(self.instance, self.store, name)(self.store, *args)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def witness_value(self, index: int) -> int:
        self.call("getWitness", index)
        return self.read_shared()

    def witness(self) -> list[int]:
        """Every witness value: copied out by one call of a small wasm loop (_DUMP_WAT), or one
        by one where the circuit's memory cannot grow by the witness's size."""
        n = self.call("getWitnessSize")
        memory = self.instance.exports(self.store).get("memory")
        size = 4 * self.n32
        if isinstance(memory, wasmtime.Memory) and n * size < 1 << 31:
            driver = wasmtime.Instance(self.store, wasmtime.Module(self.engine, _DUMP_WAT),
                                       [memory, _export(self.instance, self.store, "getWitness"),
                                        _export(self.instance, self.store, "getSharedRWMemoryStart")])
            dst = _export(driver, self.store, "dump")(self.store, n, self.n32)
            if dst != -1:
                dst &= 0xFFFFFFFF
                raw = bytes(memory.read(self.store, dst, dst + n * size))
                return [int.from_bytes(raw[i:i + size], "little") for i in range(0, n * size, size)]
        return [self.witness_value(i) for i in range(n)]

    def read_shared(self) -> int:
        words = [self.call("readSharedRWMemory", j) & 0xFFFFFFFF for j in range(self.n32)]
        return sum(w << (32 * j) for j, w in enumerate(words))

    def write_shared(self, value: int) -> None:
        if self.shared is not None:
            memory, start = self.shared
            memory.write(self.store, value.to_bytes(4 * self.n32, "little"), start)
            return
        for j in range(self.n32):
            word = (value >> (32 * j)) & 0xFFFFFFFF
            self.call("writeSharedRWMemory", j, word - (1 << 32) if word >= 1 << 31 else word)

    def failure(self, signal: str | None, fallback: str) -> WitnessError:
        """What the trap meant: circom's code and the message the circuit printed."""
        rt = self.runtime
        reason = _CODES.get(rt.code, fallback)
        if not rt.code and self.store.get_fuel() == 0:
            reason = "the witness generator ran past its instruction budget"
        if not rt.code and self.timed_out.is_set():
            reason = f"the witness generator ran past its time limit of {self.seconds:g} s"
        detail = "; ".join(m.strip() for m in rt.messages if m.strip())
        return WitnessError(signal, f"{reason} ({detail})" if detail else reason)


def _split(h: int) -> tuple[int, int]:
    msb, lsb = h >> 32, h & 0xFFFFFFFF

    def signed(v: int) -> int:
        return v - (1 << 32) if v >= 1 << 31 else v

    return signed(msb), signed(lsb)


def top_level_names(sym_lines: Iterable[str]) -> list[str]:
    """The main component's signal names in a circom ``.sym`` file's lines (``b`` for ``main.b[1]``).

    The .wasm knows its inputs only by hash; these names let a missing one be named."""
    names: dict[str, None] = {}
    for line in sym_lines:
        full = line.rsplit(",", 1)[-1].strip()
        if full.startswith("main.") and "." not in full[5:]:
            names[full[5:].split("[", 1)[0]] = None
    return list(names)


def _missing(calc: _Calculator, given: set[str], candidates: Iterable[str]) -> list[str]:
    missing = []
    for name in candidates:
        if name in given:
            continue
        try:
            if calc.call("getInputSignalSize", *_split(fnv1a64(name))) > 0:
                missing.append(name)
        except (_Abort, wasmtime.Trap):
            continue  # not an input: the runtime reports "signal not found"
    return missing


def calculate_witness(wasm_bytes: bytes, inputs: dict[str, Any], signal_names: Iterable[str] = (), *,
                      fuel: int = DEFAULT_FUEL, memory: int = DEFAULT_MEMORY, seconds: float | None = None) -> list[int]:
    """The full witness (w[0] = 1, outputs, public inputs, private values) for ``inputs``.

    Raises WitnessError naming the signal for an unknown signal, a wrong number of values,
    or a value outside the field; a failing assertion or an input left unset is refused too
    (the unset one named when ``signal_names``, e.g. from top_level_names of the .sym, has it).
    """
    if not isinstance(inputs, dict):
        raise WitnessError(None, "inputs must be an object of signal names to values")
    try:
        calc = _Calculator(wasm_bytes, fuel, memory, seconds)
    except (wasmtime.WasmtimeError, KeyError, TypeError) as exc:
        raise WitnessError(None, f"the circuit's .wasm is not a circom witness generator ({exc})") from None
    try:
        return _run(calc, inputs, signal_names)
    finally:
        calc.close()


def _run(calc: _Calculator, inputs: dict[str, Any], signal_names: Iterable[str]) -> list[int]:
    try:
        calc.call("init", 1)
    except (_Abort, wasmtime.Trap):
        raise calc.failure(None, "the witness generator failed to start") from None
    set_count = 0
    for name, value in inputs.items():
        msb, lsb = _split(fnv1a64(str(name)))
        try:
            size = calc.call("getInputSignalSize", msb, lsb)
        except (_Abort, wasmtime.Trap):
            size = -1
        if size <= 0:
            raise WitnessError(str(name), "is not an input signal of this circuit")
        values = list(_flatten(str(name), value))
        if len(values) != size:
            raise WitnessError(str(name), f"takes {size} value(s), got {len(values)}")
        for pos, raw in enumerate(values):
            calc.write_shared(_field_value(str(name), raw, calc.prime))
            try:
                calc.call("setInputSignal", msb, lsb, pos)
            except (_Abort, wasmtime.Trap):
                # The last input set runs the circuit: an assertion failing here is the circuit's
                raise calc.failure(None if calc.runtime.code == 4 else str(name), "the circuit refused the inputs") from None
            set_count += 1
    expected = calc.call("getInputSize")
    if set_count < expected:
        missing = _missing(calc, {str(n) for n in inputs}, signal_names)
        if missing:
            raise WitnessError(missing[0], "is an input signal of the circuit and has no value"
                               + (f" (nor {', '.join(missing[1:])})" if missing[1:] else ""))
        raise WitnessError(None, f"not every input signal is set: {set_count} of {expected} values given")
    try:
        return calc.witness()
    except (_Abort, wasmtime.Trap):
        raise calc.failure(None, "the witness generator failed reading the witness") from None


def circuit_prime(wasm_bytes: bytes) -> int:
    """The field the circuit was compiled for (circom's --prime): a probe, not a run."""
    return _Calculator(wasm_bytes, PROBE_FUEL, PROBE_MEMORY, probing=True).prime


def fuel_for(n_signals: int) -> int:
    """The instruction budget of one witness of a circuit with ``n_signals`` signals."""
    return FUEL_BASE + FUEL_PER_SIGNAL * max(0, n_signals)


def input_signals(wasm_bytes: bytes, names: Iterable[str] = ()) -> dict[str, Any]:
    """What a request's inputs are checked against: ``count``, the input values the circuit
    takes, and ``signals``, each input's length by name (None when no names are known, e.g.
    without the .sym). A probe of the generator's tables (never ``init``), on a small budget."""
    return {key: value for key, value in probe(wasm_bytes, names).items() if key != "prime"}


def probe(wasm_bytes: bytes, names: Iterable[str] = ()) -> dict[str, Any]:
    """input_signals, and ``prime``, the field the circuit was compiled for, from one compile."""
    names = list(names)
    try:
        calc = _Calculator(wasm_bytes, PROBE_FUEL, PROBE_MEMORY, probing=True)
        count = calc.call("getInputSize")
        sizes = {}
        for name in names:
            try:
                size = calc.call("getInputSignalSize", *_split(fnv1a64(name)))
            except (_Abort, wasmtime.Trap):
                continue  # not an input: the runtime reports "signal not found"
            if size > 0:
                sizes[name] = size
    except (wasmtime.WasmtimeError, wasmtime.Trap, KeyError, TypeError, _Abort) as exc:
        raise WitnessError(None, f"the circuit's .wasm is not a circom witness generator ({exc})") from None
    return {"prime": calc.prime, "count": int(count), "signals": sizes if names else None}


def check_inputs(inputs: Any, meta: dict[str, Any], prime: int) -> dict[str, list[str]]:
    """The checks a request's inputs get before they are accepted, from the circuit's metadata
    alone (input_signals): every signal known and of its length, every value in the field,
    none missing. Returns them as the witness generator will take them: each signal's values,
    flattened, as decimal strings. WitnessError names the signal at fault."""
    if not isinstance(inputs, dict):
        raise WitnessError(None, "inputs must be an object of signal names to values")
    signals: dict[str, int] | None = meta.get("signals")
    out: dict[str, list[str]] = {}
    for name, value in inputs.items():
        name = str(name)
        values = list(_flatten(name, value))
        if signals is not None:
            if name not in signals:
                raise WitnessError(name, "is not an input signal of this circuit")
            if len(values) != signals[name]:
                raise WitnessError(name, f"takes {signals[name]} value(s), got {len(values)}")
        out[name] = [str(_field_value(name, v, prime)) for v in values]
    if signals is not None:
        missing = [n for n in signals if n not in out]
        if missing:
            raise WitnessError(missing[0], "is an input signal of the circuit and has no value"
                               + (f" (nor {', '.join(missing[1:])})" if missing[1:] else ""))
    given = sum(len(v) for v in out.values())
    if given != meta["count"]:
        raise WitnessError(None, f"not every input signal is set: {given} of {meta['count']} values given"
                           if given < meta["count"] else f"{given} values given; the circuit takes {meta['count']}")
    return out


__all__ = ["WitnessError", "calculate_witness", "check_inputs", "circuit_prime", "fnv1a64", "fuel_for",
           "input_signals", "probe", "top_level_names"]


def witness_array(witness: list[int]) -> np.ndarray:
    """(n, 4) uint64 limbs, little end first: the layout the prover and write_wtns take."""
    mask = (1 << 64) - 1
    return np.array([[(v >> (64 * k)) & mask for k in range(4)] for v in witness], dtype=np.uint64)

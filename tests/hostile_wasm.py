"""Witness generators that misbehave, as WebAssembly text compiled at test time: each exports
what circom's runtime offers (the field, one input signal, a witness of one value) so it
registers like a circom circuit, and its ``init`` never returns, or grows its memory page
after page. Shared by the prover's and the API's tests."""

from __future__ import annotations

import wasmtime

from engine.prover.params.curves import CURVES

LOOPS = "(loop $forever (br $forever))"
GROWS = "(loop $forever (drop (memory.grow (i32.const 1))) (br $forever))"


def generator(init_body: str, curve: str = "bn128") -> bytes:
    """A circom-shaped module over ``curve``'s scalar field whose ``init`` runs ``init_body``."""
    prime = CURVES[curve].r.to_bytes(32, "little")
    data = "".join(f"\\{b:02x}" for b in prime)
    return bytes(wasmtime.wat2wasm(f"""
(module
  (import "runtime" "exceptionHandler" (func $exception (param i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "{data}")
  (func (export "getFieldNumLen32") (result i32) (i32.const 8))
  (func (export "getRawPrime"))
  (func (export "readSharedRWMemory") (param $j i32) (result i32)
    (i32.load (i32.mul (local.get $j) (i32.const 4))))
  (func (export "writeSharedRWMemory") (param i32 i32))
  (func (export "getInputSize") (result i32) (i32.const 1))
  (func (export "getInputSignalSize") (param i32 i32) (result i32) (i32.const 1))
  (func (export "setInputSignal") (param i32 i32 i32))
  (func (export "getWitnessSize") (result i32) (i32.const 1))
  (func (export "getWitness") (param i32))
  (func (export "getMessageChar") (result i32) (i32.const 0))
  (func (export "init") (param i32) {init_body}))
"""))


def _leb(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _sleb(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        if (value == 0 and not byte & 0x40) or (value == -1 and byte & 0x40):
            out.append(byte)
            return bytes(out)
        out.append(byte | 0x80)


def _section(section_id: int, payload: bytes) -> bytes:
    return bytes([section_id]) + _leb(len(payload)) + payload


def bulky(megabytes: float) -> bytes:
    """A valid module of about ``megabytes`` MB that is nothing but code to compile: functions of
    i64 arithmetic, each body 1000 multiply-adds long. Encoded directly (wat2wasm is slow at
    this size); a compiler takes seconds over it, as over a big circuit's generator."""
    step = b"".join(b"\x20\x00\x42" + _sleb(k * 7 + 3) + b"\x7e\x20\x00\x7c\x21\x00" for k in range(1000))
    body = b"\x00" + step + b"\x20\x00\x0b"  # no locals beyond the parameter; return it
    entry = _leb(len(body)) + body
    count = max(1, int(megabytes * 1e6) // len(entry))
    types = _section(1, _leb(1) + b"\x60\x01\x7e\x01\x7e")  # (i64) -> i64
    functions = _section(3, _leb(count) + b"\x00" * count)
    code = _section(10, _leb(count) + entry * count)
    return b"\x00asm\x01\x00\x00\x00" + types + functions + code

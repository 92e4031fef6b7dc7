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

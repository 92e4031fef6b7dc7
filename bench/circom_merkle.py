"""Our Poseidon-Merkle circuit written in circom, for bench/synthesis.py --circom.

``circom_source(challenges, depth)`` is winning-post's circuit in circom: the same Poseidon
instance and constants over BLS12-381 (engine.circuits.poseidon), the same rows per level (a
boolean bit, the conditional swap's one product, the hash's 279) and per path (the bits packed
to the public index, the root's equality), so at 14 paths of 16 levels it is the
winning-post/medium circuit, 62,972 constraints, and its witness for that partition's data is
checked by the circuit's own assertions against our root. circom2 (tests/oracle's npm package)
compiles it once into the cache; its witness is then computed by circom's JavaScript/wasm
generator in node (warm: the module compiled once, best of the calls, in rounds that alternate
with as many of our syntheses, so that both meet the same neighbours) and by the engine's
wasmtime runner (engine.prover.formats.wasm_witness, a whole call as a synthesis process makes
it: compile, inputs, run, witness read back). With ``cpp``, also by the C++ generator circom
emits (``--c``: g++, GMP and nlohmann-json needed, and nasm for its assembly field code), a whole
process a run (its start, reading its constants and the input, writing the .wtns).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from bench._table import markdown_table
from engine.circuits.kinds import circuit_for
from engine.circuits.poseidon import MATERIALIZE_EVERY, MDS, R_F, R_P, ROUND_CONSTANTS
from engine.prover.config import current

ROOT = Path(__file__).resolve().parents[1]
CIRCOM2 = ROOT / "tests" / "oracle" / "node_modules" / ".bin" / "circom2"
NAME = "merkle"

# node: circom's witness calculator over the compiled .wasm, warm, one figure per call (ms).
NODE_TIMER = """
const fs = require("fs");
const [wasm, inputPath, runs] = process.argv.slice(2);
const calculator = require(require("path").join(require("path").dirname(wasm), "witness_calculator.js"));
(async () => {
  const input = JSON.parse(fs.readFileSync(inputPath, "utf8"));
  const calc = await calculator(fs.readFileSync(wasm));
  await calc.calculateWTNSBin(input, 0);
  const times = [];
  for (let i = 0; i < Number(runs); i++) {
    const t = process.hrtime.bigint();
    await calc.calculateWTNSBin(input, 0);
    times.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  console.log(JSON.stringify(times));
})();
"""


def circom_source(challenges: int, depth: int) -> str:
    rc = ", ".join(str(k) for k in ROUND_CONSTANTS)
    mds = ", ".join("[" + ", ".join(str(k) for k in row) + "]" for row in MDS)
    sboxes = R_F * 3 + R_P
    mats = 2 * ((R_P - 1) // MATERIALIZE_EVERY)
    half = R_F // 2
    return f"""pragma circom 2.0.0;

// winning-post's circuit: C Merkle paths of D levels, Poseidon x5_255_3 over BLS12-381 (bench/circom_merkle.py)
template PoseidonMerkle(C, D) {{
    signal input root;
    signal input index[C];
    signal input leaf[C];
    signal input siblings[C][D];
    var RC[{len(ROUND_CONSTANTS)}] = [{rc}];
    var M[3][3] = [{mds}];
    signal bits[C][D];
    signal d[C][D];
    signal x2[C][D][{sboxes}];
    signal x4[C][D][{sboxes}];
    signal x5[C][D][{sboxes}];
    signal mat[C][D][{mats}];
    for (var c = 0; c < C; c++) {{
        var packed = 0;
        for (var l = 0; l < D; l++) {{
            bits[c][l] <-- (index[c] >> l) & 1;
            bits[c][l] * bits[c][l] === bits[c][l];
            packed += bits[c][l] * (1 << l);
        }}
        packed === index[c];
        var node = leaf[c];
        for (var l = 0; l < D; l++) {{
            d[c][l] <== bits[c][l] * (siblings[c][l] - node);
            var s[3] = [0, node + d[c][l], siblings[c][l] - d[c][l]];
            var k = 0;
            var m = 0;
            for (var r = 0; r < {R_F + R_P}; r++) {{
                var t[3];
                for (var i = 0; i < 3; i++) {{
                    t[i] = s[i] + RC[3 * r + i];
                }}
                var full = r < {half} || r >= {half + R_P};
                for (var i = 0; i < 3; i++) {{
                    if (full || i == 0) {{
                        x2[c][l][k] <== t[i] * t[i];
                        x4[c][l][k] <== x2[c][l][k] * x2[c][l][k];
                        x5[c][l][k] <== x4[c][l][k] * t[i];
                        t[i] = x5[c][l][k];
                        k++;
                    }}
                }}
                for (var i = 0; i < 3; i++) {{
                    s[i] = M[i][0] * t[0] + M[i][1] * t[1] + M[i][2] * t[2];
                }}
                var p = r - {half};
                if (p >= 0 && p < {R_P - 1} && (p + 1) % {MATERIALIZE_EVERY} == 0) {{
                    mat[c][l][m] <== s[1];
                    s[1] = mat[c][l][m];
                    mat[c][l][m + 1] <== s[2];
                    s[2] = mat[c][l][m + 1];
                    m += 2;
                }}
            }}
            node = s[0];
        }}
        node === root;
    }}
}}

component main {{public [root, index]}} = PoseidonMerkle({challenges}, {depth});
"""


def build(challenges: int, depth: int) -> Path:
    """The compiled circuit's folder (cached by its source's digest)."""
    source = circom_source(challenges, depth)
    folder = current().cache_dir / "bench-circom" / hashlib.sha256(source.encode()).hexdigest()[:16]
    wasm = folder / f"{NAME}_js" / f"{NAME}.wasm"
    if not wasm.exists():
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{NAME}.circom").write_text(source)
        done = subprocess.run([str(CIRCOM2), f"{NAME}.circom", "--r1cs", "--wasm", "--O0", "--prime", "bls12381"],
                              cwd=folder, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"circom2 failed: {done.stdout[-2000:]}{done.stderr[-2000:]}")
    return folder


def cpp_generator(folder: Path) -> Path | None:
    """circom's C++ witness generator for the circuit in ``folder``, built once; None (and why,
    printed) where its toolchain is missing."""
    import shutil

    binary = folder / f"{NAME}_cpp" / NAME
    if binary.exists():
        return binary
    missing = [tool for tool in ("g++", "make", "nasm") if shutil.which(tool) is None]
    headers = {"gmp.h": ("/usr/include/gmp.h", "/usr/include/x86_64-linux-gnu/gmp.h"),
               "nlohmann/json.hpp": ("/usr/include/nlohmann/json.hpp",)}
    missing += [name for name, places in headers.items() if not any(Path(p).exists() for p in places)]
    if missing:
        print(f"circom's C++ generator not built: {', '.join(missing)} missing")
        return None
    for cmd, cwd in (([str(CIRCOM2), f"{NAME}.circom", "--c", "--O0", "--prime", "bls12381"], folder),
                     (["make", "-j2"], folder / f"{NAME}_cpp")):
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
        if done.returncode != 0:
            print(f"circom's C++ generator not built: {' '.join(cmd)} failed: {done.stderr[-500:]}")
            return None
    return binary


def r1cs_constraints(path: Path) -> int:
    """nConstraints from the .r1cs's header."""
    from engine.prover.formats.r1cs import r1cs_header

    with path.open("rb") as fh:
        return r1cs_header(fh, path.stat().st_size).n_constraints


def compare_with_circom(ours: Callable[[], float], label: str, rounds: int, calls: int, cpp: bool = False) -> None:
    """Print circom's witness figures beside ``ours`` (one synthesis of ``label``, seconds), all
    timed in the same ``rounds``: in each, a node process's ``calls`` warm calls, then as many of
    ours, then circom's C++ generator (``cpp``) twice; each figure the best of its runs."""
    from engine.prover.formats.wasm_witness import calculate_witness

    shape = circuit_for("winning-post", "medium")
    data = shape.partition_data({"sector_seed": "11" * 32, "randomness": "22" * 32}, 0)
    inputs = {"root": str(data.roots[0]), "index": [str(c) for c in data.challenges],
              "leaf": [str(v) for v in data.leaves], "siblings": [[str(v) for v in path] for path in data.siblings]}
    t0 = time.perf_counter()
    folder = build(shape.challenges, shape.depth)
    built_s = time.perf_counter() - t0
    wasm = folder / f"{NAME}_js" / f"{NAME}.wasm"
    constraints = r1cs_constraints(folder / f"{NAME}.r1cs")
    (folder / "input.json").write_text(json.dumps(inputs))
    (folder / "timer.js").write_text(NODE_TIMER)
    binary = cpp_generator(folder) if cpp else None
    runs: dict[str, list[float]] = {"node": [], "ours": [], "cpp": []}
    for _ in range(rounds):
        node = subprocess.run(["node", str(folder / "timer.js"), str(wasm), str(folder / "input.json"), str(calls)],
                              capture_output=True, text=True, check=True)
        runs["node"] += [t / 1e3 for t in json.loads(node.stdout)]
        runs["ours"] += [ours() for _ in range(calls)]
        for _ in range(2 if binary is not None else 0):
            t0 = time.perf_counter()
            subprocess.run([str(binary), str(folder / "input.json"), str(folder / "cpp.wtns")], check=True,
                           capture_output=True)
            runs["cpp"].append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    witness = calculate_witness(wasm.read_bytes(), inputs)  # a second or so: once
    wasmtime_ms = (time.perf_counter() - t0) * 1e3
    node_ms, ours_ms = min(runs["node"]) * 1e3, min(runs["ours"]) * 1e3
    table = [["circom's wasm generator (node, warm)", f"{node_ms:.1f}", f"{node_ms * 1e3 / constraints:.2f}",
              f"**{ours_ms / node_ms:.2f}×**"],
             ["the engine's wasmtime runner (a whole call)", f"{wasmtime_ms:.1f}",
              f"{wasmtime_ms * 1e3 / constraints:.2f}", f"{ours_ms / wasmtime_ms:.3f}×"]]
    if runs["cpp"]:
        cpp_ms = min(runs["cpp"]) * 1e3
        table.append(["circom's C++ generator (a whole process a run)", f"{cpp_ms:.1f}",
                      f"{cpp_ms * 1e3 / constraints:.2f}", f"{ours_ms / cpp_ms:.2f}×"])
    table.append([f"ours: {label} synthesis (data, witness, A·w, B·w, C·w, check)", f"{ours_ms:.1f}",
                  f"{ours_ms * 1e3 / shape.n_constraints:.2f}", "1"])
    print(f"\ncircom circuit: {constraints:,} constraints, {len(witness):,} signals (built in {built_s:.1f} s); "
          f"its assertions accept our partition's data, root {data.roots[0]:#x}; {rounds} rounds of {calls} calls")
    print(markdown_table(["witness of the 62,972-constraint Poseidon-Merkle circuit", "ms", "µs per constraint",
                          "ours / it"], table))

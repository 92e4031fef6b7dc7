"""Where the prover's arithmetic runs: the CPU's compiled kernels (cpu/), the GPU's (cuda.py), and
the kernels' C sources they both compile (kernels/). A backend knows fields, curves, MSMs and
NTTs; it reads no file format and knows nothing of Groth16's protocol beyond the kernels it calls
(import-linter's contracts in pyproject.toml hold it to that)."""

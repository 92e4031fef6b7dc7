"""Benchmarks, each run as `python bench/<name>.py`. A package, so that bench/engine.py is the
module bench.engine to the type checker, not a second `engine`."""

from engine.prover.config import process_defaults

# A bench is an application: its thread pools are set as the service's and the command line's
# are, before numpy or the kernels load (benches that set Django up get the same from its settings).
process_defaults()

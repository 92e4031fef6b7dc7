"""Benchmarks, each run as `python bench/<name>.py`. A package, so that bench/engine.py is the
module bench.engine to the type checker, not a second `engine`."""

"""The curves' parameters and the constants derived from them (GLV lattices, pairing
constants): pure arithmetic that imports nothing else of the prover."""

"""The CPU backend: the kernels compiled by cffi (native_build), their Python bindings (native,
groth16_native), the fixed-base tables, and the mulx code generator for the field's multiply."""

"""A pointer handed to a kernel keeps its array alive: an array made in a call's argument
list is not freed (and overwritten by another thread) before the kernel reads it."""

from __future__ import annotations

import gc
import weakref

import numpy as np

from engine.prover.backends.cpu.native import pointer as kernel_pointer


def test_the_pointer_keeps_a_temporary_array_alive_until_it_is_dropped() -> None:
    array = np.arange(8, dtype=np.uint64)
    alive = weakref.ref(array)
    pointer = kernel_pointer(array)
    del array
    gc.collect()
    assert alive() is not None and pointer[7] == 7
    del pointer
    gc.collect()
    assert alive() is None


def test_a_pointer_reads_the_array_it_was_made_from() -> None:
    array = np.array([1, 2, 3], dtype=np.int64)
    assert [kernel_pointer(array, "int64_t *")[i] for i in range(3)] == [1, 2, 3]

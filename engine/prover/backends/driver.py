"""Whether this machine has an NVIDIA driver, answered from the files the driver leaves,
without importing CuPy (or numpy): the command line and the skip reasons ask it first."""

from __future__ import annotations

import os

# What the NVIDIA driver leaves on a machine it runs (WSL's is /dev/dxg).
NVIDIA_DRIVER_PATHS = ("/dev/nvidiactl", "/proc/driver/nvidia/version", "/dev/dxg")
NO_DRIVER = "no NVIDIA GPU on this machine (no NVIDIA driver)"


def nvidia_driver_present() -> bool:
    return any(os.path.exists(p) for p in NVIDIA_DRIVER_PATHS)

"""Where the prover keeps what it compiles (CPU kernels, GPU cubins).

The application embedding the prover names the directory (the engine passes its
settings.PROVINGSITE["CACHE_DIR"] at start-up); a bare library user or the command line
gets PROVINGSITE_CACHE_DIR, else <repo>/.cache, which is what the engine's settings
default to as well, so both share one set of compiled kernels.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

_chosen: Path | None = None


def use_cache_dir(directory: Path | str | None) -> None:
    """Compile into ``directory`` from now on; None goes back to the environment's choice."""
    global _chosen
    _chosen = None if directory is None else Path(directory)


def cache_dir() -> Path:
    if _chosen is not None:
        return _chosen
    raw = os.environ.get("PROVINGSITE_CACHE_DIR")
    return Path(raw).expanduser().resolve() if raw else REPO_ROOT / ".cache"

"""A file written whole or not at all.

The bytes go to a temporary name beside the file, renamed over it once written (a reader sees
the old file or the new one, never half); when the writing fails (a full disk, above all) the
temporary file is removed, so a failed write leaves nothing behind to keep the disk full.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def replaced(path: str | os.PathLike[str], ending: str = "") -> Iterator[Path]:
    """The temporary path to write ``path``'s new content to, inside the block; ``ending``
    keeps a suffix a writer insists on (numpy's savez adds ``.npz`` to a name without it)."""
    target = Path(path)
    # unique to the call: two threads of one process may write the same file at once
    temporary = target.with_name(f"{target.name}.tmp{os.getpid()}-{secrets.token_hex(4)}{ending}")
    try:
        yield temporary
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


__all__ = ["replaced"]

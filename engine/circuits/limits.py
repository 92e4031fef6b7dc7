"""The built-in kinds' names and the partition bound, with no Django behind them.

The circuits are a library; the engine's state models (engine/states.py) take these
values from here, so the two agree without the circuits importing the models.
"""

from __future__ import annotations

WINNING_POST = "winning-post"
WINDOW_POST = "window-post"
POREP_C2 = "porep-c2"
SNAP_UPDATE = "snap-update"

BUILTIN_KINDS = (WINNING_POST, WINDOW_POST, POREP_C2, SNAP_UPDATE)

MAX_WINDOW_POST_PARTITIONS = 64

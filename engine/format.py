"""How durations, sizes and moments are written, everywhere the project writes them.

One copy, so the console, /status, the admin and the engine's log lines agree to the byte
(console.js mirrors ``fmt_ms`` for the durations it ticks in the browser).
"""

from __future__ import annotations

from datetime import datetime


def fmt_ms(ms: float | None) -> str:
    """Durations as operators read them: 587ms, 5.2s, 3m 04s, 2h 05m."""
    if ms is None:
        return "—"
    if ms < 1000:
        return f"{int(ms)}ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f}s"
    minutes, seconds = divmod(int(ms // 1000), 60)
    if minutes < 60:
        return f"{minutes}m {seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


def fmt_bytes(n: float | None) -> str:
    """Sizes in binary units: 0 B, 512 B, 1.5 KiB, 2.0 GiB."""
    if not n:
        return "0 B"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def epoch_ms(moment: datetime | None) -> int | None:
    return int(moment.timestamp() * 1000) if moment else None


def ms_between(start: datetime | None, end: datetime | None) -> int | None:
    """Milliseconds from ``start`` to ``end``; None unless both are known."""
    return int((end - start).total_seconds() * 1000) if start and end else None

"""How durations, sizes, moments and curves are written, everywhere the project writes them.

One copy, so the console, /status, the admin and the engine's log lines agree to the byte
(console.js mirrors ``fmt_ms`` for the durations it ticks in the browser).

Moments: a page writes one in UTC and says so, ``2026-12-06 22:05:13 UTC`` (``fmt_moment``;
the ``moment`` template filter and the admin's DATETIME_FORMAT write the same); the API, /status
and the event streams in ISO 8601, UTC with a ``Z`` and milliseconds, as JavaScript's
``toISOString`` does: ``2026-12-06T22:05:13.123Z`` (``iso_moment``).

Curves: the API and snarkjs's files name a curve by snarkjs's identifier (``bn128``,
``bls12381``), the pages by its name with that identifier beside it, ``BN254 (bn128)``
(``curve_text``): one curve, one name a reader can look up either way.
"""

from __future__ import annotations

from datetime import UTC, datetime


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


def fmt_moment(moment: datetime | None, *, ms: bool = False) -> str:
    """A moment as a page shows it: ``2026-12-06 22:05:13 UTC`` (with ``ms``,
    ``2026-12-06 22:05:13.123 UTC``); "—" for none. A naive moment is taken as UTC."""
    if moment is None:
        return "—"
    at = moment.astimezone(UTC) if moment.tzinfo else moment
    fraction = f".{at.microsecond // 1000:03d}" if ms else ""
    return f"{at:%Y-%m-%d %H:%M:%S}{fraction} UTC"


def iso_moment(moment: datetime | str | None) -> str | None:
    """A moment as the API writes it: ISO 8601 in UTC, milliseconds and a ``Z``,
    ``2026-12-06T22:05:13.123Z``; None for none. A naive moment is taken as UTC; a moment
    recorded as ISO 8601 text (a JSON column's) is read and written again, other text kept."""
    if moment is None:
        return None
    if isinstance(moment, str):
        try:
            parsed = datetime.fromisoformat(moment)
        except ValueError:
            return moment
        return iso_moment(parsed)
    at = moment.astimezone(UTC) if moment.tzinfo else moment
    return f"{at:%Y-%m-%dT%H:%M:%S}.{at.microsecond // 1000:03d}Z"


# snarkjs's identifier of each curve (the API's ``curve``) and the curve's name.
CURVE_NAMES = {"bn128": "BN254", "bls12381": "BLS12-381"}


def curve_name(curve: str) -> str:
    """A curve's name (the API's ``curve_name``): BN254 for snarkjs's bn128."""
    return CURVE_NAMES.get(curve, curve)


def curve_text(curve: str) -> str:
    """A curve as a page names it: ``BN254 (bn128)``, its name and snarkjs's identifier."""
    name = curve_name(curve)
    return name if name == curve else f"{name} ({curve})"

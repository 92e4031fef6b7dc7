"""How templates write moments and curves: the same words engine.format gives Python.

``{% load console_text %}``, then ``{{ job.submitted_at|moment }}`` (``2026-12-06 22:05:13 UTC``),
``{{ line.at|moment_ms }}`` (with milliseconds, for log lines), ``{{ job.curve|curve }}``
(``BN254 (bn128)``).
"""

from __future__ import annotations

from datetime import datetime

from django import template

from engine.format import curve_text, fmt_moment, iso_moment

register = template.Library()


@register.filter
def moment(value: datetime | None) -> str:
    return fmt_moment(value)


@register.filter
def moment_ms(value: datetime | None) -> str:
    return fmt_moment(value, ms=True)


@register.filter
def iso(value: datetime | None) -> str:
    """For a ``<time datetime=…>`` attribute."""
    return iso_moment(value) or ""


@register.filter
def curve(value: str) -> str:
    return curve_text(value)

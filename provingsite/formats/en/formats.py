"""How Django writes dates and times where it picks the format itself (the admin's lists and
forms' read-only fields): as the console does, in UTC and saying so (engine.format.fmt_moment),
never "Dec. 6, 2026, 10:05 p.m."."""

DATETIME_FORMAT = "Y-m-d H:i:s T"  # T: the zone's abbreviation; TIME_ZONE is UTC
SHORT_DATETIME_FORMAT = DATETIME_FORMAT
DATE_FORMAT = "Y-m-d"
SHORT_DATE_FORMAT = DATE_FORMAT
TIME_FORMAT = "H:i:s"

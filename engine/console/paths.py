"""Paths served outside Django's URLconf, so ``reverse()`` cannot name them: the event streams
are Channels routes of their own, in front of Django (provingsite/routing.py)."""

EVENTS_PATH = "/events/"
JOB_EVENTS_PATH = "/api/v1/events"  # an API token's jobs as they move (engine.api.events)

"""Paths served outside Django's URLconf, so ``reverse()`` cannot name them: the event stream
is a Channels route of its own, in front of Django (provingsite/routing.py)."""

EVENTS_PATH = "/events/"

"""The Django admin: the job history and what operators manage by hand, one module a concept.

Django's autodiscovery imports this package; each module registers its models.
"""

from engine.admin import circuits, jobs, keys, tokens

__all__ = ["circuits", "jobs", "keys", "tokens"]

from pathlib import Path

from django.apps import AppConfig


class EngineConfig(AppConfig):
    name = "engine"
    verbose_name = "Proving engine"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """The prover and the circuits are Django-free libraries: hand them the settings' cache
        directory here (in the prover's configuration, as the circuits' disk cache), in every
        process that sets Django up (synthesis workers too). Every database connection reads a
        time outside Python's years without failing its query (engine.moments)."""
        from django.conf import settings
        from django.db.backends.signals import connection_created

        from engine.moments import forgive_unreadable_times

        connection_created.connect(forgive_unreadable_times, dispatch_uid="engine.moments")

        from engine.circuits.compiled import use_disk_cache
        from engine.circuits.tree_cache import use_tree_cache
        from engine.prover.config import ProverConfig, configure

        cache = settings.PROVINGSITE["CACHE_DIR"]
        configure(ProverConfig.from_env().but(cache_dir=Path(cache)))
        use_disk_cache(cache)
        use_tree_cache(cache)

from django.apps import AppConfig


class EngineConfig(AppConfig):
    name = "engine"
    verbose_name = "Proving engine"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """The prover and the circuits are Django-free libraries: hand them the settings'
        cache directory here, in every process that sets Django up (synthesis workers too)."""
        from django.conf import settings

        from engine.circuits.compiled import use_disk_cache
        from engine.prover.cachedir import use_cache_dir

        cache = settings.PROVINGSITE["CACHE_DIR"]
        use_cache_dir(cache)
        use_disk_cache(cache)

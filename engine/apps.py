from django.apps import AppConfig


class EngineConfig(AppConfig):
    name = "engine"
    verbose_name = "Proving engine"
    default_auto_field = "django.db.models.BigAutoField"

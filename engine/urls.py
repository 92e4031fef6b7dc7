"""URLs of the engine app: console, job pages, API, status and metrics."""

from django.urls import path

from engine.api import api
from engine.api.metrics import metrics
from engine.api.status import status
from engine.console import views as console

urlpatterns = [
    path("api/v1/", api.urls),
    path("status", status, name="status"),
    path("metrics", metrics, name="metrics"),
    path("", console.console, name="console"),
    path("login/", console.login, name="console-login"),
    path("logout/", console.logout, name="console-logout"),
    # The proofs route comes first: a job id may itself contain slashes.
    path("jobs/<path:job_id>/proofs.json", console.job_proofs, name="console-job-proofs"),
    path("jobs/<path:job_id>", console.job_detail, name="console-job"),
]

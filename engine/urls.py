"""URLs of the engine app: console, job pages, API, status and metrics."""

from django.urls import path

from engine.api import api
from engine.api.metrics import metrics
from engine.api.status import status
from engine.console import capacity_page, drain, history, jobs_page, key_actions
from engine.console import views as console

urlpatterns = [
    path("api/v1/", api.urls),
    path("status", status, name="status"),
    path("metrics", metrics, name="metrics"),
    path("", console.console, name="console"),
    path("jobs/", jobs_page.jobs_page, name="console-jobs"),
    path("history/", history.history_page, name="console-history"),
    path("capacity/", capacity_page.capacity_page, name="console-capacity"),
    path("login/", console.login, name="console-login"),
    path("logout/", console.logout, name="console-logout"),
    # The proofs route comes first: a job id may itself contain slashes.
    path("jobs/<path:job_id>/proofs.json", console.job_proofs, name="console-job-proofs"),
    path("jobs/<path:job_id>/snarkjs.json", console.job_snarkjs, name="console-job-snarkjs"),
    path("jobs/<path:job_id>/verification_key.json", console.job_verification_key, name="console-job-vk"),
    path("jobs/<path:job_id>/cancel", jobs_page.cancel, name="console-job-cancel"),
    path("jobs/<path:job_id>/retry", jobs_page.retry, name="console-job-retry"),
    path("jobs/<path:job_id>", console.job_detail, name="console-job"),
    path("hosts/<path:name>/drain", drain.drain, name="console-host-drain"),
    path("hosts/<path:name>/resume", drain.resume, name="console-host-resume"),
    path("keys/action", key_actions.key_action, name="console-key-action"),
]

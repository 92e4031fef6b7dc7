"""The Django admin as the job-history browser.

History is read-only: a proof, a timestamp or a state edited by hand would make the record
lie. State changes go through the cancel/retry actions, which use the engine's own writer.
"""

from __future__ import annotations

from datetime import timedelta

from django.contrib import admin, messages
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest

from engine.models import ApiToken, EngineHost, Partition, ProofJob, Worker
from engine.states import JOB_ACTIVE, JobState, PartitionState


def _seconds(delta: timedelta | None) -> str:
    return "—" if delta is None else f"{delta.total_seconds():.1f}s"


def _ms(value: int | None) -> str:
    return "—" if value is None else f"{value} ms"


class PartitionInline(admin.TabularInline):
    model = Partition
    extra = 0
    can_delete = False
    show_change_link = False
    fields = ("index", "state", "worker", "host", "attempt", "synth", "gpu", "finalize", "error")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    @admin.display(description="synthesis")
    def synth(self, obj: Partition) -> str:
        return _ms(obj.synth_ms)

    @admin.display(description="gpu")
    def gpu(self, obj: Partition) -> str:
        return _ms(obj.gpu_ms)

    @admin.display(description="finalize")
    def finalize(self, obj: Partition) -> str:
        return _ms(obj.finalize_ms)


@admin.register(ProofJob)
class ProofJobAdmin(admin.ModelAdmin):
    list_display = ("job_id", "kind", "state", "priority", "host", "submitted_at", "queue", "total", "progress")
    list_filter = ("kind", "state", "host", ("submitted_at", admin.DateFieldListFilter))
    search_fields = ("job_id",)
    date_hierarchy = "submitted_at"
    inlines = [PartitionInline]
    actions = ["cancel_jobs", "retry_jobs"]
    readonly_fields = (
        "job_id", "kind", "priority", "curve", "circuit_id", "scale", "inputs", "request_digest",
        "num_partitions", "state", "submitted_at", "started_at", "finished_at", "error", "verified",
        "host", "client", "upload_dir", "version", "proof", "public_inputs",
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[ProofJob]:
        return (
            super().get_queryset(request)
            .select_related("host")
            .annotate(done_count=Count("partitions", filter=Q(partitions__state=PartitionState.DONE)))
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # jobs arrive through the API or submitjob, which validate them

    @admin.display(description="queue time")
    def queue(self, obj: ProofJob) -> str:
        return _seconds(obj.queue_time)

    @admin.display(description="total time")
    def total(self, obj: ProofJob) -> str:
        return _seconds(obj.total_time)

    @admin.display(description="partitions done")
    def progress(self, obj: ProofJob) -> str:
        return f"{getattr(obj, 'done_count', 0)}/{obj.num_partitions}"

    @admin.action(description="Cancel selected queued or running jobs")
    def cancel_jobs(self, request: HttpRequest, queryset: QuerySet[ProofJob]) -> None:
        from engine.ledger.jobs import cancel_job

        jobs = [job for job in queryset if job.state in JOB_ACTIVE]
        for job in jobs:
            cancel_job(job)
        self.message_user(request, f"Cancelled {len(jobs)} job(s).", messages.SUCCESS)

    @admin.action(description="Retry selected failed or cancelled jobs")
    def retry_jobs(self, request: HttpRequest, queryset: QuerySet[ProofJob]) -> None:
        from engine.ledger.jobs import retry_job

        jobs = [job for job in queryset if job.state in (JobState.FAILED, JobState.CANCELLED)]
        for job in jobs:
            retry_job(job)
        self.message_user(request, f"Requeued {len(jobs)} job(s).", messages.SUCCESS)


class WorkerInline(admin.TabularInline):
    model = Worker
    extra = 0
    can_delete = False
    readonly_fields = ("device", "ordinal")

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(EngineHost)
class EngineHostAdmin(admin.ModelAdmin):
    list_display = ("name", "backend", "started_at", "heartbeat_at", "stopped_at", "memory_used_bytes",
                    "memory_budget_bytes")
    readonly_fields = tuple(f.name for f in EngineHost._meta.fields)
    inlines = [WorkerInline]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("name", "scope", "max_priority", "max_active_jobs", "prefix", "created_at", "last_used_at",
                    "revoked_at")
    list_filter = ("scope",)
    # The limits are the admin's to change (max_active_jobs empty is no cap); the secret is not.
    list_editable = ("max_priority", "max_active_jobs")
    readonly_fields = ("prefix", "token_hash", "created_at", "last_used_at")
    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # `manage.py createtoken NAME` prints the secret once; the admin never sees it

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        from django.utils import timezone

        count = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(request, f"Revoked {count} token(s).", messages.SUCCESS)

import engine.admin_circuits  # noqa: E402,F401  registered circom circuits

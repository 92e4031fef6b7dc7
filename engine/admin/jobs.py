"""The Django admin as the job-history browser.

History is read-only: a proof, a timestamp or a state edited by hand would make the record
lie. So jobs, hosts and circuits have no change permission here at all (their pages are
views, with no Save buttons); state changes go through the cancel/retry actions, which use the
same service as the console and the API (engine.ledger.jobs). A queued or running job cannot be
deleted: an engine is working on it; cancel it first. Every write here is a call into the
ledger, the only writer of rows.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest

from engine.format import curve_text
from engine.ledger.hosts import HostInUse, remove_stopped, set_cost_per_hour
from engine.ledger.jobs import delete_finished
from engine.models import EngineHost, Partition, ProofJob, Worker
from engine.states import JOB_ACTIVE, JobState, PartitionState


def _ms_as_seconds(ms: int | None) -> str:
    return "—" if ms is None else f"{ms / 1000:.1f}s"


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
    fieldsets = (
        (None, {"fields": ("job_id", "kind", "priority", "state", "num_partitions", "verified", "error")}),
        ("When and where", {"fields": ("submitted_at", "deadline", "latest_start_at", "started_at", "finished_at",
                                       "host", "client")}),
        ("Request", {"fields": ("curve_named", "circuit_id", "scale", "inputs", "request_digest", "upload_dir",
                                "version")}),
        # Kilobytes of curve points per partition: folded away until asked for.
        ("Proof", {"classes": ("collapse",), "fields": ("proof", "public_inputs")}),
    )
    readonly_fields = tuple(name for _, spec in fieldsets for name in spec["fields"] if isinstance(name, str))

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False  # a view of the record: no form, no Save buttons

    @admin.display(description="curve", ordering="curve")
    def curve_named(self, obj: ProofJob) -> str:
        return curve_text(obj.curve)  # as the console names it: BN254 (bn128)

    def has_delete_permission(self, request: HttpRequest, obj: ProofJob | None = None) -> bool:
        if obj is not None and obj.state in JOB_ACTIVE:
            return False  # an engine holds it: cancel it first
        return super().has_delete_permission(request, obj)

    def delete_model(self, request: HttpRequest, obj: ProofJob) -> None:
        delete_finished(ProofJob.objects.filter(pk=obj.pk))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[ProofJob]) -> None:
        delete_finished(queryset)

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> tuple[Any, Any, Any, list[Any]]:
        # "Delete selected" with a queued or running job among them lists those jobs as protected,
        # which makes Django refuse the whole deletion (and say why) rather than delete under an engine.
        deletable, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        active = [f"{job} is {job.state}: cancel it before deleting it" for job in objs if job.state in JOB_ACTIVE]
        if active and super().has_delete_permission(request):
            # has_delete_permission(job) said no only because the job is active: say that instead.
            perms_needed.discard(self.opts.verbose_name)
        return deletable, counts, perms_needed, [*protected, *active]

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
        return _ms_as_seconds(obj.queue_ms)  # engine.figures.JOB_QUEUE

    @admin.display(description="total time")
    def total(self, obj: ProofJob) -> str:
        return _ms_as_seconds(obj.total_ms)  # engine.figures.TOTAL

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
        from engine.ledger.submission import retry

        jobs = [job for job in queryset if job.state in (JobState.FAILED, JobState.CANCELLED)]
        for job in jobs:
            retry(job)
        self.message_user(request, f"Requeued {len(jobs)} job(s).", messages.SUCCESS)


class WorkerInline(admin.TabularInline):
    model = Worker
    extra = 0
    can_delete = False
    readonly_fields = ("device", "ordinal")

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False  # the engine writes its worker slots


@admin.register(EngineHost)
class EngineHostAdmin(admin.ModelAdmin):
    list_display = ("name", "backend", "started_at", "heartbeat_at", "stopped_at", "memory_budget_bytes",
                    "cost_per_hour")
    # Engines write their own rows; an operator sets only what the host costs (the cost per proof).
    fields = ("cost_per_hour", *(f.name for f in EngineHost._meta.fields if f.name not in ("id", "cost_per_hour")))
    readonly_fields = tuple(f.name for f in EngineHost._meta.fields if f.name != "cost_per_hour")
    inlines = [WorkerInline]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: EngineHost, form: Any, change: bool) -> None:
        set_cost_per_hour(obj, form.cleaned_data["cost_per_hour"])


    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> tuple[Any, Any, Any, list[Any]]:
        # A running host, or one whose claimed work is not yet requeued, is listed as protected:
        # Django then refuses the deletion and says why.
        deletable, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        busy = [f"{host.name} has not stopped: stop its engine first" for host in objs if host.stopped_at is None]
        return deletable, counts, perms_needed, [*protected, *busy]

    def delete_model(self, request: HttpRequest, obj: EngineHost) -> None:
        self.delete_queryset(request, EngineHost.objects.filter(pk=obj.pk))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[EngineHost]) -> None:
        try:
            remove_stopped(queryset)
        except HostInUse as exc:
            self.message_user(request, f"Nothing deleted: {exc}.", messages.ERROR)

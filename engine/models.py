"""The records. What the console, /status and the admin show is read from these rows."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from engine.figures import FINALIZE, GPU, QUEUE, RESERVE, SYNTHESIS, AttemptTimes, job_queue_ms, job_total_ms
from engine.moments import STORED_EARLIEST, STORED_LATEST
from engine.states import PARTITION_LIVE, Curve, JobState, PartitionState, Priority, ProofKind

# The status clock of writes made outside an engine host (submissions, cancels, drains): row 1,
# which was the farm's only clock before each host had its own, so older stamps are its own.
WEB_CLOCK = 1


class ProofJob(models.Model):
    job_id = models.CharField(max_length=200, help_text="The client's request id; never shared by two requests.")
    kind = models.CharField(max_length=32, choices=ProofKind.choices)
    priority = models.PositiveSmallIntegerField(choices=Priority.choices, default=Priority.NORMAL)
    curve = models.CharField(max_length=16, choices=Curve.choices, default=Curve.BLS12_381)
    circuit_id = models.CharField(max_length=200, blank=True, help_text="Circuit shape, e.g. snap-update/tiny.")
    scale = models.CharField(max_length=16, blank=True)
    inputs = models.JSONField(default=dict, blank=True)
    # A digest of what the client asked for, so a resubmission can be told apart from a clash.
    request_digest = models.CharField(max_length=64, blank=True)
    num_partitions = models.PositiveIntegerField(default=1)
    state = models.CharField(max_length=16, choices=JobState.choices, default=JobState.QUEUED)
    submitted_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True, help_text="Its first claim (since its latest retry).")
    finished_at = models.DateTimeField(null=True, blank=True)
    retried_at = models.DateTimeField(null=True, blank=True,
                                      help_text="An operator's latest retry: its queue counts from then. Empty: never.")
    error = models.TextField(blank=True)
    proof = models.JSONField(null=True, blank=True, help_text="Partition proofs in order.")
    public_inputs = models.JSONField(null=True, blank=True)
    verified = models.BooleanField(default=False)
    host = models.ForeignKey("EngineHost", null=True, blank=True, on_delete=models.SET_NULL, related_name="jobs")
    client = models.ForeignKey("ApiToken", null=True, blank=True, on_delete=models.SET_NULL, related_name="jobs")
    upload_dir = models.CharField(max_length=500, blank=True, help_text="Where a custom circuit's files are kept.")
    vk_digest = models.CharField(max_length=64, blank=True,
                                 help_text="The verifying key every partition's proof verified under (SHA-256).")
    deadline = models.DateTimeField(null=True, blank=True, help_text="When the proof is worthless if not done.")
    callback_url = models.CharField(max_length=2000, blank=True,
                                    help_text="POSTed, signed, when the job ends (or the token's default).")
    latest_start_at = models.DateTimeField(
        null=True, blank=True, help_text="The deadline less the job's expected duration on this farm (p95 of its "
                                         "circuit's recorded jobs) at submission: claims serve the least slack first.")
    clock = models.PositiveIntegerField(default=WEB_CLOCK, help_text="The status clock that stamped the last change.")
    version = models.BigIntegerField(default=0, help_text="That clock's value at the last change.")
    revision = models.PositiveBigIntegerField(default=0, help_text="How many stamped changes the row has had.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["job_id"], name="unique_job_id"),
            # No stored deadline its reader cannot read (engine.moments): an offset once pushed one
            # past the year 9999, which PostgreSQL kept and no engine could claim around.
            models.CheckConstraint(condition=Q(deadline__isnull=True) | Q(deadline__gte=STORED_EARLIEST,
                                                                           deadline__lte=STORED_LATEST),
                                   name="deadline_readable"),
            models.CheckConstraint(condition=Q(latest_start_at__isnull=True)
                                   | Q(latest_start_at__gte=STORED_EARLIEST, latest_start_at__lte=STORED_LATEST),
                                   name="latest_start_readable"),
        ]
        indexes = [
            models.Index(fields=["state", "priority", "submitted_at"], name="job_claim_order"),
            models.Index(fields=["kind", "state"], name="job_kind_state"),
            models.Index(fields=["finished_at"], name="job_finished"),
            # The console's passes read what each clock stamped since the reading they last made.
            models.Index(fields=["clock", "version"], name="job_clock_version"),
        ]
        ordering = ["-submitted_at"]

    def __str__(self) -> str:
        return f"{self.kind} {self.job_id}"

    @property
    def queue_ms(self) -> int | None:
        """engine.figures.JOB_QUEUE"""
        return job_queue_ms(self.submitted_at, self.retried_at, self.started_at)

    @property
    def total_ms(self) -> int | None:
        """engine.figures.TOTAL of the job"""
        return job_total_ms(self.submitted_at, self.finished_at)


class Partition(models.Model):
    job = models.ForeignKey(ProofJob, on_delete=models.CASCADE, related_name="partitions")
    index = models.PositiveIntegerField()
    state = models.CharField(max_length=16, choices=PartitionState.choices, default=PartitionState.PENDING)
    host = models.ForeignKey("EngineHost", null=True, blank=True, on_delete=models.SET_NULL, related_name="partitions")
    worker = models.ForeignKey("Worker", null=True, blank=True, on_delete=models.SET_NULL, related_name="partitions")
    attempt = models.PositiveIntegerField(default=0, help_text="Claims so far; the fencing token for writes.")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    reserved_bytes = models.BigIntegerField(default=0)
    requeued_at = models.DateTimeField(
        null=True, blank=True, help_text="When its current attempt was queued again (a failure retried, a lapsed lease, a "
                                         "hand-back, an operator's retry). Empty: queued since its job's submission.")
    claimed_at = models.DateTimeField(null=True, blank=True)
    synth_started_at = models.DateTimeField(null=True, blank=True)
    synth_finished_at = models.DateTimeField(null=True, blank=True)
    gpu_started_at = models.DateTimeField(null=True, blank=True)
    gpu_finished_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)
    errors = models.JSONField(default=list, blank=True, help_text="Every failed attempt's reason, in order.")
    attempts = models.JSONField(default=list, blank=True,
                                help_text="Each ended attempt's recorded moments, how it ended and why, oldest first "
                                          "(engine.ledger.claims.release_claim); the row's own are the current attempt's.")
    proof = models.JSONField(null=True, blank=True)
    public_inputs = models.JSONField(null=True, blank=True)
    vk_digest = models.CharField(max_length=64, blank=True, help_text="The verifying key its proof verified under.")
    clock = models.PositiveIntegerField(default=WEB_CLOCK)
    version = models.BigIntegerField(default=0)
    revision = models.PositiveBigIntegerField(default=0)
    batch = models.CharField(max_length=36, blank=True, default="",
                             help_text="The proving batch it went onto the GPU with (its first member's id); '' alone.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["job", "index"], name="unique_partition_index"),
            # The status truth, kept by the database itself so no writer bug can break it: a
            # partition on the GPU names its worker, and a worker proves one partition at a time.
            models.CheckConstraint(condition=~Q(state="gpu") | Q(worker__isnull=False), name="gpu_partition_has_worker"),
            # ... or the members of one batch (engine.pipeline.prove), which go onto it together;
            # that a worker holds one batch at a time is the ledger's (apply_batch), not this index.
            models.UniqueConstraint(fields=["worker"], condition=Q(state="gpu", batch=""),
                                    name="one_gpu_partition_per_worker"),
            # Pending means unclaimed and nothing else; every state between a claim and an end
            # names the host that holds it.
            models.CheckConstraint(condition=~Q(state="pending") | Q(host__isnull=True), name="pending_is_unclaimed"),
            models.CheckConstraint(condition=~Q(state__in=sorted(PARTITION_LIVE)) | Q(host__isnull=False),
                                   name="claimed_partition_has_host"),
        ]
        indexes = [
            models.Index(fields=["state", "job", "index"], name="part_claim_order"),
            models.Index(fields=["worker", "state"], name="part_worker_state"),
            models.Index(fields=["host", "state"], name="part_host_state"),
            models.Index(fields=["gpu_finished_at"], name="part_gpu_finished"),
            models.Index(fields=["clock", "version"], name="part_clock_version"),
            models.Index(fields=["lease_expires_at"], name="part_lease", condition=Q(lease_expires_at__isnull=False)),
        ]
        ordering = ["job_id", "index"]

    def __str__(self) -> str:
        return f"P{self.index} of {self.job.job_id}"

    @property
    def times(self) -> AttemptTimes:
        """The current attempt's moments (engine.figures)."""
        return AttemptTimes(self.job.submitted_at, self.requeued_at, self.claimed_at, self.synth_started_at,
                            self.synth_finished_at, self.gpu_started_at, self.gpu_finished_at, self.finished_at)

    @property
    def queue_ms(self) -> int | None:
        return self.times.ms(QUEUE)

    @property
    def reserve_ms(self) -> int | None:
        return self.times.ms(RESERVE)

    @property
    def synth_ms(self) -> int | None:
        return self.times.ms(SYNTHESIS)

    @property
    def gpu_ms(self) -> int | None:
        return self.times.ms(GPU)

    @property
    def finalize_ms(self) -> int | None:
        return self.times.ms(FINALIZE)


class EngineHost(models.Model):
    name = models.CharField(max_length=200, unique=True)
    backend = models.CharField(max_length=16, default="cpu", help_text="cuda or cpu")
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    stopped_at = models.DateTimeField(null=True, blank=True)
    memory_budget_bytes = models.BigIntegerField(default=0)
    memory_total_bytes = models.BigIntegerField(default=0)
    synthesis_max = models.PositiveIntegerField(default=0)
    devices = models.JSONField(default=list, blank=True, help_text="Per device: name, memory total/free/pool.")
    key_cache = models.JSONField(default=list, blank=True, help_text="Resident proving keys, written when one is loaded or evicted.")
    cost_per_hour = models.FloatField(null=True, blank=True,
                                      help_text="What an hour of this host costs (PROVINGSITE_HOST_COST_PER_HOUR), "
                                                "for the cost per proof.")
    refused_keys = models.JSONField(default=dict, blank=True,
                                    help_text="Circuits this host will not prove, each with why: its key is not the farm's "
                                              "(FarmKey) or it has none.")
    # An operator's drain (from the console): the host claims nothing new and finishes what it
    # holds, until resumed. It outlives a restart of the engine, as the operator's intent does.
    draining = models.BooleanField(default=False, help_text="Claims no new partitions while set (console: drain).")
    # Written when it changes, like key_cache: what the engine reserves for itself, by owner.
    reserved_by_engine = models.JSONField(
        default=dict, blank=True,
        help_text="Bytes the engine reserves for itself, by owner: its processes at rest, each synthesis process's "
                  "compiled matrices, a key's load buffers. Written when a reservation changes.")
    # Written when it changes, like reserved_by_engine: each CUDA device's budget and what is
    # reserved on it, by owner (engine.pipeline.device_memory).
    device_reserved = models.JSONField(
        default=dict, blank=True,
        help_text="Per CUDA device: its memory budget and the bytes reserved on it, by owner (a key's resident "
                  "bases, each launch's buffers until finished). Written when a reservation changes; empty on the CPU.")
    # Measured, not derived: the machine's own load beside what the ledger says is reserved.
    # Written by the heartbeat alone (liveness, no version taken), read through
    # engine.status.host_report.HostFigures.
    figures = models.JSONField(default=dict, blank=True,
                               help_text="Host CPU and RAM in use, the engine's resident memory and, where NVML is "
                                         "present, each device's utilisation, memory and power: sampled every heartbeat.")
    # Liveness, like heartbeat_at (no version): the last time the host asked for work with room
    # to spare. Placement (engine.ledger.placement) leaves a partition to a host holding its key
    # while that host has been free within PROVINGSITE_PLACEMENT_WAIT_S.
    free_at = models.DateTimeField(null=True, blank=True,
                                   help_text="Last time this host asked for work with room to spare (placement by key).")
    clock = models.PositiveIntegerField(default=WEB_CLOCK)
    version = models.BigIntegerField(default=0)
    revision = models.PositiveBigIntegerField(default=0)

    def __str__(self) -> str:
        return self.name


class Worker(models.Model):
    """A GPU worker slot. Its state is derived from partitions; it has no busy flag."""

    host = models.ForeignKey(EngineHost, on_delete=models.CASCADE, related_name="workers")
    device = models.CharField(max_length=32, help_text="cuda:0, cuda:1 … or cpu")
    ordinal = models.PositiveSmallIntegerField(help_text="W0, W1 … per device")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["host", "device", "ordinal"], name="unique_worker_slot")]
        ordering = ["host_id", "device", "ordinal"]

    @property
    def label(self) -> str:
        return f"W{self.ordinal}"

    def __str__(self) -> str:
        return f"{self.host.name} {self.device} {self.label}"


class StatusClock(models.Model):
    """One writer's status clock (each engine host has one, the web another): every change that
    writer makes takes its next value (engine.ledger.clock)."""

    source = models.CharField(max_length=200, unique=True, default="web", help_text="host:<name>, or web.")
    value = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.source} at {self.value}"


class TokenScope(models.TextChoices):
    # A client sees only the jobs it submitted; an operator token (dashboards, the farm's own
    # scripts) sees every job and the farm's /status.
    CLIENT = "client", "client: its own jobs"
    OPERATOR = "operator", "operator: every job and /status"


# Enough for a busy client's pipeline; a runaway script stops at this many rather than
# filling the farm's queue. Operator tokens have none (null).
DEFAULT_MAX_ACTIVE_JOBS = 64


class ApiToken(models.Model):
    name = models.CharField(max_length=200, unique=True)
    scope = models.CharField(max_length=16, choices=TokenScope.choices, default=TokenScope.CLIENT)
    # The highest priority this token may ask for with an explicit override; a kind's own
    # default (winning-post is critical) is the farm's policy and stands regardless.
    max_priority = models.PositiveSmallIntegerField(
        choices=Priority.choices, default=Priority.NORMAL,
        help_text="The highest priority this token may ask for; client tokens start at normal.")
    max_active_jobs = models.PositiveIntegerField(
        null=True, blank=True, default=DEFAULT_MAX_ACTIVE_JOBS,
        help_text="Queued plus running jobs this token may have at once; empty for no cap.")
    prefix = models.CharField(max_length=12, db_index=True, help_text="First characters, to recognise a token.")
    token_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    callback_url = models.CharField(max_length=2000, blank=True,
                                    help_text="Where this token's jobs report their end unless a job names its own.")

    class Meta:
        verbose_name = "API token"  # Django would write "Api token"
        verbose_name_plural = "API tokens"

    @property
    def sees_every_job(self) -> bool:
        return self.scope == TokenScope.OPERATOR

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"


class Circuit(models.Model):
    """A registered circom circuit: its zkey (and optionally .wasm and .r1cs), stored once.

    The id is the zkey's SHA-256, so the files live content-addressed under
    DATA_DIR/circuits/<id>/ and registering the same key again finds this row."""

    id = models.CharField(max_length=64, primary_key=True, help_text="SHA-256 of the zkey, hex.")
    name = models.CharField(max_length=200, blank=True, help_text="The uploaded zkey's file name.")
    curve = models.CharField(max_length=16, choices=Curve.choices)
    n_public = models.PositiveIntegerField()
    n_vars = models.PositiveIntegerField()
    domain_size = models.PositiveIntegerField()
    zkey_path = models.CharField(max_length=500)
    zkey_bytes = models.BigIntegerField()
    wasm_path = models.CharField(max_length=500, blank=True)
    wasm_bytes = models.BigIntegerField(null=True, blank=True)
    r1cs_path = models.CharField(max_length=500, blank=True)
    r1cs_bytes = models.BigIntegerField(null=True, blank=True)
    owner = models.ForeignKey("ApiToken", null=True, blank=True, on_delete=models.SET_NULL, related_name="circuits")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    @property
    def job_circuit_id(self) -> str:
        """The circuit id its jobs carry (ProofJob.circuit_id)."""
        return self.job_circuit_id_of(self.id)

    @staticmethod
    def job_circuit_id_of(pk: str) -> str:
        """The circuit id the jobs of the circuit ``pk`` carry: ``circom/<sha256 of its zkey>``."""
        return f"circom/{pk}"

    def __str__(self) -> str:
        return f"{self.name or 'circuit'} {self.id[:12]} ({self.curve})"


class FarmKey(models.Model):
    """The verifying key the farm proves a circuit with, by digest: the first key a host loaded
    for it (or the one ``setupkeys`` wrote). A host whose key for the circuit has another digest
    refuses to prove it, so no job's partitions verify under two different keys."""

    circuit_id = models.CharField(max_length=200, unique=True)
    vk_digest = models.CharField(max_length=64, help_text="snarkjs_json.vk_digest of the verifying key")
    recorded_by = models.CharField(max_length=200, help_text="The host (or setupkeys) that recorded it.")
    recorded_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.circuit_id} {self.vk_digest[:12]}"


class Callback(models.Model):
    """One notification of a job's end to its client: POSTed until delivered or given up,
    every attempt recorded (engine.ledger.callbacks)."""

    job = models.ForeignKey(ProofJob, on_delete=models.CASCADE, related_name="callbacks")
    url = models.CharField(max_length=2000)
    event = models.CharField(max_length=16, help_text="The state the job ended in.")
    created_at = models.DateTimeField(auto_now_add=True)
    next_at = models.DateTimeField(help_text="When the next attempt is due (or, while one is in flight, its lease).")
    attempts = models.JSONField(default=list, blank=True, help_text="Each attempt: at, HTTP status or error.")
    delivered_at = models.DateTimeField(null=True, blank=True)
    gave_up_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["delivered_at", "gave_up_at", "next_at"], name="callback_due")]

    def __str__(self) -> str:
        return f"{self.event} of {self.job_id} to {self.url}"


class JobLogLine(models.Model):
    """One of the engine's log lines about a job (claimed, proved P3, refused, job done …), kept
    so the job's page can show what the engines said about it. Only the last few per job are
    kept (engine.ledger.job_log trims them as it appends): the full log is the engine's own."""

    job = models.ForeignKey(ProofJob, on_delete=models.CASCADE, related_name="log_lines")
    at = models.DateTimeField(help_text="When the engine logged it.")
    level = models.CharField(max_length=10, help_text="DEBUG, INFO, WARNING, ERROR or CRITICAL.")
    host = models.CharField(max_length=200, blank=True, help_text="The engine host that logged it.")
    partition = models.PositiveIntegerField(null=True, blank=True, help_text="The partition's index, if about one.")
    message = models.TextField()

    class Meta:
        # A job's page reads its newest lines; the trim finds the oldest past the bound.
        indexes = [models.Index(fields=["job", "-id"], name="joblog_job_newest")]
        ordering = ["job_id", "id"]

    def __str__(self) -> str:
        return f"{self.at:%H:%M:%S} {self.level} {self.message[:60]}"


class KeyRequest(models.Model):
    """An operator's request that one host preload a proving key to a tier, or demote it
    (engine.ledger.key_requests): written by the web side, carried out by the host's engine as
    soon as it commits (a wake; the heartbeat as the fallback), which records the outcome on the
    row; failed by the host's stop if it was not carried out by then."""

    class Action(models.TextChoices):
        PRELOAD = "preload"
        EVICT = "evict"

    class State(models.TextChoices):
        PENDING = "pending"
        DONE = "done"
        REFUSED = "refused"  # the engine would not: the key does not fit, or is in use
        FAILED = "failed"  # the engine tried and could not (no key for the circuit, …)

    circuit_id = models.CharField(max_length=200)
    host = models.ForeignKey(EngineHost, on_delete=models.CASCADE, related_name="key_requests")
    action = models.CharField(max_length=8, choices=Action.choices)
    tier = models.CharField(max_length=8, help_text="preload: hot or warm; evict: warm or cold.")
    needed_bytes = models.BigIntegerField(default=0, help_text="The key's estimated bytes, when it was asked.")
    state = models.CharField(max_length=8, choices=State.choices, default=State.PENDING)
    reason = models.TextField(blank=True, help_text="Why it was refused or failed; what was done.")
    requested_by = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["host", "state"], name="keyrequest_host_state")]
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.action} {self.circuit_id} to {self.tier} on {self.host_id}: {self.state}"

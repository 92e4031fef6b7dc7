"""Capacity from the farm's own history: the records of a range, replayed on other farms.

``recorded(since, until)`` reads, in one snapshot, what the simulator
(engine.status.capacity_sim) needs: the jobs submitted in the range as arrivals (time, kind
and circuit, priority, deadline and latest start, partitions), each circuit's service times
from its partitions that finished in the range (or, for a circuit with none there, its last
recorded ones), what a partition reserves, and the shape of the hosts that did the work.
``capacity(...)`` replays it for several host counts and memory budgets and says, per farm,
the p50/p95 wait (submitted → first claim, submitted → done), the deadlines missed and the
cost per proof, beside what was measured.

Service times come from the records as they are, except the device time: workers on one
device share its lock, and a partition is recorded ``gpu`` from the moment its worker takes
it, lock wait included. A device's partitions, in the order they left it, each held it from
the later of its start and the previous one's end: that is the service time replayed.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, NamedTuple

from django.conf import settings
from django.db.models import Count, Min, Q, QuerySet

from engine import figures
from engine.circuits.kinds import InputError, parse_circuit_id
from engine.models import EngineHost, Partition, ProofJob, Worker
from engine.states import JobState, PartitionState
from engine.status.capacity_sim import Arrival, HostShape, Outcome, Profile, Scenario, Service, simulate
from engine.status.holdings import key_sizes
from engine.status.read import one_snapshot
from engine.status.records import host_rows

MAX_JOBS = 2000  # the most recent jobs of a range replayed; the answer says when it is capped
MAX_PARTITIONS = 10000
FALLBACK_PARTITIONS = 200  # a circuit with no partition finished in the range: its last ones
SPARE_HOSTS = 3  # the default farms: current − 1 … current + SPARE_HOSTS


@dataclass(frozen=True)
class Measured:
    """A job's measured waits (None where it did not get that far)."""

    claim_wait_s: float | None
    done_wait_s: float | None
    missed: bool


@dataclass
class Recorded:
    """The simulator's input read from a range, and what the farm measured over it."""

    since: datetime
    until: datetime
    arrivals: list[Arrival] = field(default_factory=list)
    profiles: dict[str, Profile] = field(default_factory=dict)
    measured: list[Measured] = field(default_factory=list)
    host: HostShape | None = None
    hosts: int = 0
    opens_s: float = 0.0
    origin: datetime | None = None  # when capped: the first replayed job's submission, the replay's zero
    jobs_in_range: int = 0
    unmodelled: int = 0  # jobs of a circuit never recorded finishing: nothing to replay them with

    @property
    def capped(self) -> bool:
        return self.jobs_in_range > len(self.arrivals) + self.unmodelled

    @property
    def span_s(self) -> float:
        """The time replayed: the range, or from the first replayed job when capped."""
        return (self.until - (self.origin or self.since)).total_seconds()

    def scenario(self, hosts: int, budget: int | None = None, seed: int = 0) -> Scenario:
        assert self.host is not None
        shape = self.host if budget is None else replace(self.host, memory_budget=budget)
        return Scenario(self.arrivals, self.profiles, shape, hosts=hosts, span_s=self.span_s, seed=seed,
                        opens_s=self.opens_s)


def circuit_of(kind: str, circuit_id: str, scale: str) -> str:
    """The name a job's service times are kept under: its circuit, else its kind and scale."""
    return circuit_id or (f"{kind}/{scale}" if scale else kind)


def _seconds(a: datetime | None, b: datetime | None) -> float | None:
    return figures.seconds_between(a, b)


# ---- reading --------------------------------------------------------------------------------


class JobRow(NamedTuple):
    job_id: str
    kind: str
    circuit_id: str
    scale: str
    priority: int
    num_partitions: int
    submitted_at: datetime
    deadline: datetime | None
    latest_start_at: datetime | None
    retried_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    state: str

    @property
    def circuit(self) -> str:
        return circuit_of(self.kind, self.circuit_id, self.scale)


class PartRow(NamedTuple):
    """A partition done: its circuit, its proving attempt's moments, what it reserved, and the
    device it was proved on."""

    kind: str
    circuit_id: str
    scale: str
    claimed_at: datetime | None
    synth_started_at: datetime
    synth_finished_at: datetime | None
    gpu_started_at: datetime
    gpu_finished_at: datetime | None
    finished_at: datetime | None
    reserved_bytes: int | None
    host: int | None  # its worker's host (None: the worker's row is gone)
    device: str | None
    job_id: str
    number: int  # its index in the job

    @property
    def circuit(self) -> str:
        return circuit_of(self.kind, self.circuit_id, self.scale)


JOB_FIELDS = JobRow._fields
PART_FIELDS = ("job__kind", "job__circuit_id", "job__scale", "claimed_at", "synth_started_at", "synth_finished_at",
               "gpu_started_at", "gpu_finished_at", "finished_at", "reserved_bytes", "worker__host_id",
               "worker__device", "job__job_id", "index")


def _jobs(since: datetime, until: datetime) -> tuple[list[JobRow], int]:
    """The range's jobs (cancelled ones asked for nothing to be proved), the latest MAX_JOBS of
    them in submission order, and how many there were."""
    rows = ProofJob.objects.filter(submitted_at__gte=since, submitted_at__lt=until).exclude(state=JobState.CANCELLED)
    total = rows.count()
    latest = [JobRow._make(r) for r in rows.order_by("-submitted_at", "-pk").values_list(*JOB_FIELDS)[:MAX_JOBS]]
    return latest[::-1], total


def _partitions(since: datetime, until: datetime, missing: set[str]) -> list[PartRow]:
    """Partitions done in the range, and the last ones of each circuit with none there."""
    done = Partition.objects.filter(state=PartitionState.DONE, gpu_started_at__isnull=False,
                                    synth_started_at__isnull=False)
    rows = [PartRow._make(r) for r in done.filter(finished_at__gte=since, finished_at__lt=until)
            .values_list(*PART_FIELDS)]
    seen = {r.circuit for r in rows}
    for circuit in sorted(missing - seen):
        kind, _, scale = circuit.partition("/")
        match = Q(job__circuit_id=circuit) | Q(job__circuit_id="", job__kind=kind, job__scale=scale)
        rows += [PartRow._make(r) for r in done.filter(match).order_by("-finished_at").values_list(*PART_FIELDS)
                 [:FALLBACK_PARTITIONS]]
    return rows


def _device_times(rows: list[PartRow]) -> list[float]:
    """Each row's DEVICE time (engine.figures: holding its device's lock), in row order."""
    by_device: dict[tuple[Any, Any], list[int]] = defaultdict(list)
    for i, row in enumerate(rows):
        by_device[(row.host, row.device)].append(i)
    out = [0.0] * len(rows)
    for (host, _), indexes in by_device.items():
        if host is None:  # its worker's row is gone: the device is unknown, its time is taken whole
            for i in indexes:
                out[i] = max(0.0, _seconds(rows[i].gpu_started_at, rows[i].gpu_finished_at) or 0.0)
            continue
        held = figures.device_seconds([(rows[i].gpu_started_at, rows[i].gpu_finished_at or rows[i].gpu_started_at)
                                       for i in indexes])
        for i, seconds in zip(indexes, held, strict=True):
            out[i] = seconds
    return out


def _memory_shares(circuit: str) -> tuple[int, int]:
    """A built-in circuit's A·w, B·w, C·w share and its cached key's bytes, fixed-base tables
    included where the engine keeps them (PROVINGSITE_FIXED_BASE), as the engine sizes them
    (pipeline.work.size_of); 0 for others."""
    try:
        needs = parse_circuit_id(circuit).memory
    except (InputError, KeyError, ValueError):
        return 0, 0
    tables = needs.table_bytes if settings.PROVINGSITE["FIXED_BASE"] else 0
    return int(needs.released_bytes), int(needs.key_bytes + tables)


def _key_sizes() -> dict[str, int]:
    """The bytes each circuit's key holds on a running host that has it now: the size its key
    chip shows in the console (engine.status.holdings.key_sizes), measured, so preferred to
    the circuit's estimate."""
    return key_sizes(host for host in host_rows() if host.stopped_at is None)


def _dispatch_times(rows: list[PartRow], circuits: list[str], abc: dict[str, int], keys: dict[str, int],
                    budgets: dict[Any, int]) -> dict[str, float]:
    """Each circuit's dispatcher time, claim to synthesis: the median gap of its partitions
    whose memory was free when they were claimed (the gap of one that waited for memory is
    mostly that wait, which the simulator makes for itself); the least gap if none was.

    What a host held at each claim is swept from its partitions' records: a partition holds
    its reservation from its synthesis on, less its A·w/B·w/C·w share once off the device,
    until done; beside it, the claimed partition's own key."""
    free: dict[str, list[float]] = defaultdict(list)
    every: dict[str, list[float]] = defaultdict(list)
    by_host: dict[Any, list[int]] = defaultdict(list)
    for i, row in enumerate(rows):
        by_host[row.host].append(i)
    for host, indexes in by_host.items():
        moments: list[tuple[datetime, int, int]] = []  # (when, 0: bytes change | 1: a claim, bytes | row)
        for i in indexes:
            r = rows[i]
            need = int(r.reserved_bytes or 0)
            share = min(abc[circuits[i]], need)
            assert r.gpu_finished_at is not None and r.finished_at is not None
            moments += [(r.synth_started_at, 0, need), (r.gpu_finished_at, 0, -share), (r.finished_at, 0, share - need)]
            if r.claimed_at is not None:
                moments.append((r.claimed_at, 1, i))
        held, budget = 0, budgets.get(host, 0)
        for _, what, value in sorted(moments, key=lambda m: (m[0], m[1])):
            if what == 0:
                held += value
                continue
            row, circuit = rows[value], circuits[value]
            gap = max(0.0, _seconds(row.claimed_at, row.synth_started_at) or 0.0)
            every[circuit].append(gap)
            if not budget or held + int(row.reserved_bytes or 0) + keys[circuit] <= budget:
                free[circuit].append(gap)
    return {c: statistics.median(free[c]) if free[c] else min(gaps) for c, gaps in every.items()}


def _profiles(rows: list[PartRow], key_sizes: dict[str, int], budgets: dict[Any, int],
              own: dict[str, dict[int, Service]]) -> dict[str, Profile]:
    """Each circuit's profile; ``own`` gets each job's partitions' phases by index: their
    synthesis, device and finalize (engine.figures)."""
    rows = [r for r in rows if r.gpu_finished_at is not None and r.finished_at is not None]  # left the device, and done
    circuits = [r.circuit for r in rows]
    memory: dict[str, int] = defaultdict(int)
    for row, circuit in zip(rows, circuits, strict=True):
        memory[circuit] = max(memory[circuit], int(row.reserved_bytes or 0))
    shares = {c: _memory_shares(c) for c in memory}
    abc = {c: min(shares[c][0], memory[c]) for c in memory}
    keys = {c: key_sizes.get(c) or shares[c][1] for c in memory}
    dispatch = _dispatch_times(rows, circuits, abc, keys, budgets)
    services: dict[str, list[Service]] = defaultdict(list)
    for row, circuit, device_s in zip(rows, circuits, _device_times(rows), strict=True):
        service = Service(_seconds(row.synth_started_at, row.synth_finished_at) or 0.0, device_s,
                          _seconds(row.gpu_finished_at, row.finished_at) or 0.0)
        services[circuit].append(service)
        own.setdefault(row.job_id, {})[row.number] = service
    return {c: Profile(tuple(recorded), memory_bytes=memory[c], abc_bytes=abc[c], key_bytes=keys[c],
                       dispatch_s=dispatch.get(c, 0.0))
            for c, recorded in services.items()}


def _opens(since: datetime, until: datetime, claims: QuerySet[Partition]) -> float:
    """When the farm began claiming, in seconds from ``since``: 0 for a farm that ran before the
    range; for one whose hosts all started inside it, their first claim (a host's start-up —
    its synthesis processes, its keys — is not the steady state a replay is about)."""
    if EngineHost.objects.filter(started_at__lt=since).filter(Q(stopped_at__isnull=True) | Q(stopped_at__gt=since)
                                                              ).exists():
        return 0.0
    first = claims.aggregate(at=Min("claimed_at"))["at"]
    return max(0.0, (first - since).total_seconds()) if first is not None else 0.0


def _host_shape(since: datetime, until: datetime) -> tuple[HostShape | None, int, float]:
    """The shape of the host that claimed the most partitions in the range, how many hosts
    claimed any (the current farm), and when the farm began claiming (``_opens``)."""
    claims = Partition.objects.filter(claimed_at__gte=since, claimed_at__lt=until, host__isnull=False)
    ranked = list(claims.values("host").annotate(n=Count("pk")).order_by("-n").values_list("host", "n"))
    if not ranked:
        return None, 0, 0.0
    host = EngineHost.objects.get(pk=ranked[0][0])
    devices = list(Worker.objects.filter(host=host).values("device").annotate(n=Count("pk")).values_list("device", "n"))
    per_device = max((n for _, n in devices), default=1)
    shape = HostShape(memory_budget=host.memory_budget_bytes, synthesis=max(host.synthesis_max, 1),
                      devices=max(len(devices), 1), workers_per_device=per_device,
                      cost_per_hour=float(host.cost_per_hour or 0.0))
    return shape, len(ranked), _opens(since, until, claims)


def _arrival(row: JobRow, since: datetime, own: dict[str, dict[int, Service]]) -> Arrival:
    n = max(int(row.num_partitions), 1)
    mine = own.get(row.job_id, {})
    return Arrival(row.job_id, (row.submitted_at - since).total_seconds(), row.circuit,
                   partitions=n, priority=int(row.priority), deadline_s=_seconds(row.submitted_at, row.deadline),
                   latest_start_s=_seconds(row.submitted_at, row.latest_start_at),
                   services=tuple(mine[i] for i in range(n)) if set(mine) == set(range(n)) else ())


def _measured(row: JobRow) -> Measured:
    """A job's measured waits: its JOB_QUEUE (submission, or its latest retry, to its first
    claim since) and its TOTAL when done (engine.figures)."""
    queue = figures.job_queue_ms(row.submitted_at, row.retried_at, row.started_at)
    total = figures.job_total_ms(row.submitted_at, row.finished_at) if row.state == JobState.DONE else None
    return Measured(None if queue is None else queue / 1000, None if total is None else total / 1000,
                    missed=row.deadline is not None and row.finished_at is not None and row.finished_at > row.deadline)


def recorded(since: datetime, until: datetime, key_sizes: dict[str, int] | None = None,
             own_services: bool = False) -> Recorded:
    """The range's records as the simulator's input, read in one snapshot. ``key_sizes``: keys'
    measured bytes a caller knows (a benchmark whose host has stopped, and so lists no key),
    over those the hosts list and the circuits' estimates. ``own_services``: each job whose
    partitions all finished replays their own phases (a trace replay) instead of draws."""
    with one_snapshot():
        jobs, total = _jobs(since, until)
        circuits = {r.circuit for r in jobs}
        budgets = dict(EngineHost.objects.values_list("pk", "memory_budget_bytes"))
        own: dict[str, dict[int, Service]] = {}
        profiles = _profiles(_partitions(since, until, circuits), {**_key_sizes(), **(key_sizes or {})}, budgets, own)
        host, hosts, opens_s = _host_shape(since, until)
    out = Recorded(since, until, profiles=profiles, host=host, hosts=hosts, opens_s=opens_s, jobs_in_range=total)
    kept, parts = [], 0
    for row in reversed(jobs):  # the latest first, up to MAX_PARTITIONS
        if row.circuit not in profiles:
            out.unmodelled += 1
            continue
        parts += max(int(row.num_partitions), 1)
        if parts > MAX_PARTITIONS:
            break
        kept.append(row)
    kept.reverse()
    if kept and len(kept) + out.unmodelled < total:  # capped: the replay starts at its first job
        out.origin = kept[0].submitted_at
        out.opens_s = max(0.0, opens_s - (out.origin - since).total_seconds())
    out.arrivals = [_arrival(row, out.origin or since, own if own_services else {}) for row in kept]
    out.measured = [_measured(row) for row in kept]
    return out


# ---- the answer --------------------------------------------------------------------------------


def waits(values: list[float | None]) -> dict[str, float | None]:
    """p50 and p95 (nearest rank, engine.figures.percentile, as every page's) of the waits there are."""
    known = [v for v in values if v is not None]
    if not known:
        return {"p50_s": None, "p95_s": None}
    return {"p50_s": float(figures.p50(known)), "p95_s": float(figures.p95(known))}


def farm_row(outcome: Outcome, budget: int) -> dict[str, Any]:
    """One simulated farm's figures."""
    return {
        "hosts": outcome.hosts, "memory_budget_bytes": budget,
        "claim_wait": waits([j.claim_wait_s for j in outcome.jobs]),
        "done_wait": waits([j.done_wait_s for j in outcome.jobs]),
        "missed_deadlines": outcome.missed, "failed_jobs": sum(1 for j in outcome.jobs if j.failed),
        "proofs": outcome.proofs, "proofs_per_hour": outcome.proofs_per_hour,
        "cost_per_proof": outcome.cost_per_proof,
    }


def default_hosts(current: int) -> list[int]:
    return list(range(max(1, current - 1), max(current, 1) + SPARE_HOSTS + 1))


def _circuit_row(circuit: str, profile: Profile) -> dict[str, Any]:
    """A circuit's service times replayed: the p50 of its partitions' synthesis, device and
    finalize (engine.figures), its reservation, and its key's bytes (the console's key chip)."""
    services = profile.services
    return {"circuit": circuit, "partitions_recorded": len(services),
            "synthesis_p50_s": figures.p50([s.synth_s for s in services]),
            "device_p50_s": figures.p50([s.device_s for s in services]),
            "finalize_p50_s": figures.p50([s.finalize_s for s in services]),
            "memory_bytes": profile.memory_bytes, "key_bytes": profile.key_bytes}


TIMES = ("drawn", "own")  # service times drawn from each circuit's records, or each job's own


def capacity(since: datetime, until: datetime, hosts: list[int] | None = None, budgets: list[int] | None = None,
             seed: int = 0, key_sizes: dict[str, int] | None = None, times: str = "drawn") -> dict[str, Any]:
    """The range replayed on each farm of ``hosts`` × ``budgets`` (defaults: the current farm's
    budget, and current − 1 … current + 3 hosts), beside what was measured; ``times`` "own"
    replays each job whose partitions all finished with their own recorded phases."""
    rec = recorded(since, until, key_sizes, own_services=times == "own")
    shape = rec.host
    answer: dict[str, Any] = {
        "since": since, "until": until, "jobs_in_range": rec.jobs_in_range, "replayed_jobs": len(rec.arrivals),
        "replayed_partitions": sum(a.partitions for a in rec.arrivals), "capped": rec.capped,
        "unmodelled_jobs": rec.unmodelled, "limits": {"jobs": MAX_JOBS, "partitions": MAX_PARTITIONS},
        "times": times, "own_times_jobs": sum(1 for a in rec.arrivals if a.services),
        "current": None if shape is None else {
            "hosts": rec.hosts, "memory_budget_bytes": shape.memory_budget, "synthesis": shape.synthesis,
            "devices": shape.devices, "workers_per_device": shape.workers_per_device,
            "cost_per_hour": shape.cost_per_hour or None},
        "measured": {"claim_wait": waits([m.claim_wait_s for m in rec.measured]),
                     "done_wait": waits([m.done_wait_s for m in rec.measured]),
                     "missed_deadlines": sum(1 for m in rec.measured if m.missed)},
        "circuits": [_circuit_row(c, p) for c, p in sorted(rec.profiles.items())],
        "farms": [],
    }
    if shape is None or not rec.arrivals:
        return answer
    for budget in budgets or [shape.memory_budget]:
        for n in hosts or default_hosts(rec.hosts):
            answer["farms"].append(farm_row(simulate(rec.scenario(n, budget, seed)), budget))
    return answer


# ---- what an operator asks for ---------------------------------------------------------------

MAX_HOSTS = 64
MAX_FARMS = 8  # host counts per answer
MAX_BUDGETS = 4
MAX_REPLAYS = 12  # farms (host counts × budgets) per answer: about half a second each at the caps


def parse_hosts(text: str) -> list[int]:
    """``"3"`` or ``"1,2,4"``: host counts of 1 … MAX_HOSTS, at most MAX_FARMS of them."""
    counts = []
    for part in (p.strip() for p in text.split(",")):
        if not part.isdigit() or not 1 <= int(part) <= MAX_HOSTS:
            raise ValueError(f"each host count must be a whole number from 1 to {MAX_HOSTS}, got {part!r}")
        counts.append(int(part))
    if len(counts) > MAX_FARMS:
        raise ValueError(f"at most {MAX_FARMS} host counts at once")
    return sorted(set(counts))


def parse_budgets(text: str) -> list[int]:
    """``"256GiB"``, ``"128GiB,512GiB"`` or byte counts: positive sizes, at most MAX_BUDGETS."""
    from engine.env import parse_size

    budgets = []
    for part in (p.strip() for p in text.split(",")):
        try:
            size = parse_size(part)
        except ValueError:
            size = 0
        if size <= 0:
            raise ValueError(f"each budget must be a positive size such as 256GiB or a byte count, got {part!r}")
        budgets.append(size)
    if len(budgets) > MAX_BUDGETS:
        raise ValueError(f"at most {MAX_BUDGETS} budgets at once")
    return sorted(set(budgets))


def check_replays(hosts: list[int] | None, budgets: list[int] | None) -> None:
    """At most MAX_REPLAYS farms per answer (the defaults are five); ValueError otherwise."""
    farms = (len(hosts) if hosts else SPARE_HOSTS + 2) * (len(budgets) if budgets else 1)
    if farms > MAX_REPLAYS:
        raise ValueError(f"at most {MAX_REPLAYS} farms (host counts × budgets) at once, asked for {farms}")

"""A discrete-event simulation of the farm's own rules, to ask "what if we had N hosts?".

Pure Python, no Django (a contract in pyproject.toml keeps it so): the reader in
engine.status.capacity turns the records into a ``Scenario``, this module replays it.

What it models is what engine.pipeline does, one host at a time, each host alike:

* **claim**: one dispatcher per host claims one partition at a time, in the claims' order
  (priority, then the earliest latest start with no deadline last, then age, then the
  partition's index: ledger.order.claim_order), while a synthesis slot is free and fewer
  than ``synthesis + 2 × workers`` partitions are synthesizing or waiting for a worker (the
  pacer, pipeline.claim); without room it sleeps until a synthesis ends or its poll is up;
* **reserve**: the dispatcher then spends the circuit's recorded claim-to-synthesis time and
  reserves the partition's memory, blocking (and claiming nothing else) until it fits beside
  the proving keys in use; a partition that can never fit fails at once, as the engine's
  ``MemoryBudgetError`` does;
* **synthesize** on one of ``synthesis`` slots;
* **prove**: a host's synthesized partitions wait in one queue, served in claim order by
  ``workers_per_device`` workers per device; a worker takes a partition (``gpu``), then waits
  for its device's lock, which one partition holds at a time for its device time;
* **finalize**: with split proving the worker hands the partition to a pool of
  ``max(2, workers)`` finalizer threads and takes the next; without it, the worker finishes
  the proof itself. The A·w, B·w, C·w share of the reservation is released when the partition
  leaves the device, the rest when it is done.

Service times are whole recorded partitions (synthesis, device, finalize seconds), drawn per
partition from its circuit's records with a seeded generator at arrival, so two scenarios
that differ only in hosts or budget replay the very same work (common random numbers): a
difference in their waits is the farm's, not the dice's.
"""

from __future__ import annotations

import enum
import heapq
import itertools
import math
import random
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field


class SimState(enum.Enum):
    """A simulated partition's states: the engine's own (engine.states.PartitionState)."""

    PENDING = "pending"
    RESERVING = "reserving"
    SYNTHESIZING = "synthesizing"
    SYNTH_DONE = "synth_done"
    GPU = "gpu"
    FINALIZING = "finalizing"
    DONE = "done"
    FAILED = "failed"


class Event(enum.IntEnum):
    """What can happen at a moment; at the same moment, lower values are handled first (work
    that ends frees its slot before an arrival looks for one)."""

    FINALIZED = 0
    DEVICE_DONE = 1
    SYNTHESIZED = 2
    RESERVED = 3
    WAKE = 4
    OPEN = 5
    ARRIVAL = 6


@dataclass(frozen=True)
class Service:
    """One recorded partition's phases, in seconds: drawn whole, so a slow synthesis and its
    slow proof stay together."""

    synth_s: float
    device_s: float
    finalize_s: float


@dataclass(frozen=True)
class Profile:
    """A circuit as the farm measured it: its partitions' phases, what a partition reserves,
    the share released when it leaves the device, its proving key's bytes (held while the host
    holds any of its partitions) and the dispatcher's time from claim to reservation."""

    services: tuple[Service, ...]
    memory_bytes: int = 0
    abc_bytes: int = 0
    key_bytes: int = 0
    dispatch_s: float = 0.0


@dataclass(frozen=True)
class Arrival:
    """A job as it was submitted: seconds from the scenario's start, its circuit (a key of
    ``Scenario.profiles``), its priority (lower first) and, as offsets from its arrival, its
    deadline and its latest start (deadline − expected duration, fixed at submission).
    ``services``, one per partition in index order, replays its partitions' own recorded
    phases instead of drawing them from the circuit's (a trace replay of the very run)."""

    job: str
    at_s: float
    circuit: str
    partitions: int = 1
    priority: int = 2
    deadline_s: float | None = None
    latest_start_s: float | None = None
    services: tuple[Service, ...] = ()


@dataclass(frozen=True)
class HostShape:
    """One host: its memory budget, synthesis slots, devices, workers per device, what an hour
    of it costs, whether it proves split (the default, as the engine does), and how long its
    dispatcher, finding no room, waits before it looks again unless a synthesis ends first
    (pipeline.synthesize.has_room's 0.2 s: room a proving worker makes by taking a partition
    off the queue wakes nobody; 0 for a dispatcher that notices at once)."""

    memory_budget: int
    synthesis: int = 2
    devices: int = 1
    workers_per_device: int = 2
    cost_per_hour: float = 0.0
    split: bool = True
    claim_poll_s: float = 0.2

    @property
    def workers(self) -> int:
        return self.devices * self.workers_per_device

    @property
    def pace_target(self) -> int:
        return self.synthesis + 2 * self.workers

    @property
    def finalizers(self) -> int:
        return max(2, self.workers)


@dataclass(frozen=True)
class Scenario:
    """What to replay and on what: ``hosts`` hosts of ``host``'s shape, paid for ``span_s``
    seconds at least (the range replayed), service times drawn with ``seed``. The hosts claim
    nothing before ``opens_s`` (a farm that started inside the range: work that arrived
    before it waited for it)."""

    arrivals: Sequence[Arrival]
    profiles: dict[str, Profile]
    host: HostShape
    hosts: int = 1
    span_s: float = 0.0
    seed: int = 0
    opens_s: float = 0.0


@dataclass(frozen=True)
class JobOutcome:
    """A simulated job: seconds from arrival to its first claim and to its end (None if it
    failed), and whether it missed its deadline (None without one)."""

    job: str
    circuit: str
    claim_wait_s: float | None
    done_wait_s: float | None
    missed: bool | None
    failed: bool


@dataclass(frozen=True)
class Outcome:
    """A replay's result: every job's outcome, the partitions that ended done and failed, the
    moment the last one ended, and the span the farm is paid for."""

    jobs: list[JobOutcome]
    partitions_done: int
    partitions_failed: int
    end_s: float
    span_s: float
    hosts: int
    cost_per_hour: float

    @property
    def proofs(self) -> int:
        return sum(1 for job in self.jobs if job.done_wait_s is not None)

    @property
    def missed(self) -> int:
        return sum(1 for job in self.jobs if job.missed)

    @property
    def proofs_per_hour(self) -> float:
        return self.proofs * 3600 / self.span_s if self.span_s > 0 else 0.0

    @property
    def cost_per_proof(self) -> float | None:
        """The hosts' cost over the span, shared by the proofs done (None when free or none)."""
        if not self.proofs or not self.cost_per_hour:
            return None
        return self.hosts * self.cost_per_hour * self.span_s / 3600 / self.proofs


# ---- the simulated things ----------------------------------------------------------------

Order = tuple[int, float, float, int, int]  # priority, latest start, arrival, job, partition index


@dataclass
class _Job:
    arrival: Arrival
    seq: int
    left: int
    first_claim: float | None = None
    done_at: float | None = None
    failed: bool = False
    parts: list[_Part] = field(default_factory=list)


@dataclass
class _Part:
    job: _Job
    index: int
    service: Service
    profile: Profile
    state: SimState = SimState.PENDING
    held: int = 0  # bytes of the host's budget it holds now
    reserving: bool = False  # the dispatcher's claim-to-reservation time is over: waiting for memory
    device: int = -1

    @property
    def order(self) -> Order:
        """The claims' order (ledger.order.claim_order; pipeline.work.WorkItem.order)."""
        a = self.job.arrival
        latest = a.at_s + a.latest_start_s if a.latest_start_s is not None else math.inf
        return (a.priority, latest, a.at_s, self.job.seq, self.index)


@dataclass
class _Device:
    busy: bool = False
    waiting: deque[_Part] = field(default_factory=deque)


@dataclass
class _Host:
    shape: HostShape
    number: int
    devices: list[_Device]
    idle_workers: list[int]  # per device
    used: int = 0
    synthesizing: int = 0
    proof_queue: list[tuple[Order, _Part]] = field(default_factory=list)
    dispatching: _Part | None = None  # claimed, not yet reserved (the dispatcher is busy with it)
    finalizers_free: int = 0
    finalize_queue: deque[_Part] = field(default_factory=deque)
    holders: dict[str, int] = field(default_factory=dict)  # circuit → partitions held (its key is in use)
    asleep_since: float | None = None  # the dispatcher found no room then, and waits (HostShape.claim_poll_s)
    wake_at: float | None = None
    key_bytes: int = 0  # the keys in use: those of the circuits in ``holders``

    def has_room(self) -> bool:
        """A free synthesis slot and the pacer's allowance (pipeline.synthesize.has_room)."""
        shape = self.shape
        return self.synthesizing < shape.synthesis and self.synthesizing + len(self.proof_queue) < shape.pace_target

    def wake(self) -> None:
        """A synthesis ended (its slot's notify), or the poll is up: the dispatcher looks again."""
        self.asleep_since = self.wake_at = None

    def next_poll(self, now: float) -> float | None:
        """When a sleeping dispatcher next looks on its own: the first tick of its poll after now
        (None if it is awake or wakes only when notified)."""
        if self.asleep_since is None or self.shape.claim_poll_s <= 0:
            return None
        poll = self.shape.claim_poll_s
        ticks = max(1, math.ceil((now - self.asleep_since) / poll - 1e-9))
        return self.asleep_since + ticks * poll


_Subject = _Job | _Host | tuple[_Host, _Part] | None


class _Farm:
    """The event loop: a heap of (moment, event, sequence, subject)."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.profiles = scenario.profiles
        shape = scenario.host
        self.hosts = [_Host(shape, n, [_Device() for _ in range(shape.devices)],
                            [shape.workers_per_device] * shape.devices, finalizers_free=shape.finalizers)
                      for n in range(scenario.hosts)]
        self.events: list[tuple[float, int, int, _Subject]] = []
        self.seq = itertools.count()
        self.pending: list[tuple[Order, _Part]] = []
        self.parts: list[_Part] = []
        self.jobs: list[_Job] = []
        self.now = 0.0
        self.open = False
        self.rng = random.Random(scenario.seed)

    def at(self, when: float, event: Event, subject: _Subject) -> None:
        heapq.heappush(self.events, (when, int(event), next(self.seq), subject))

    def run(self) -> None:
        for n, arrival in enumerate(sorted(self.scenario.arrivals, key=lambda a: a.at_s)):
            self.at(arrival.at_s, Event.ARRIVAL, self._job(arrival, n))
        self.at(self.scenario.opens_s, Event.OPEN, None)
        while self.events:
            self.now, event, _, subject = heapq.heappop(self.events)
            host = self._handle(Event(event), subject)
            for h in ([host] if host is not None else self.hosts):
                self._settle(h)
            self._dispatch()

    # -- events ----------------------------------------------------------------------------

    def _job(self, arrival: Arrival, seq: int) -> _Job:
        """A job and its partitions, their service drawn now (the same draws for every farm; drawn
        for a job that brings its own too, so the others' draws do not depend on which do)."""
        job = _Job(arrival, seq, left=arrival.partitions)
        profile = self.profiles[arrival.circuit]
        drawn = [self.rng.choice(profile.services) for _ in range(arrival.partitions)]
        own = arrival.services if len(arrival.services) == arrival.partitions else drawn
        job.parts = [_Part(job, i, service, profile) for i, service in enumerate(own)]
        self.jobs.append(job)
        self.parts.extend(job.parts)
        return job

    def _handle(self, event: Event, subject: _Subject) -> _Host | None:
        """Apply one event; the host it concerns (None: an arrival concerns every host)."""
        if event is Event.OPEN:
            self.open = True
            return None
        if event is Event.ARRIVAL:
            assert isinstance(subject, _Job)
            for part in subject.parts:
                heapq.heappush(self.pending, (part.order, part))
            return None
        if event is Event.WAKE:
            assert isinstance(subject, _Host)
            if subject.wake_at == self.now:
                subject.wake()
            return subject
        assert isinstance(subject, tuple)
        host, part = subject
        {Event.RESERVED: self._reserved, Event.SYNTHESIZED: self._synthesized,
         Event.DEVICE_DONE: self._device_done, Event.FINALIZED: self._finalized}[event](host, part)
        return host

    def _reserved(self, host: _Host, part: _Part) -> None:
        """The dispatcher's claim-to-reservation time is over: it now waits for the memory."""
        part.reserving = True
        if part.profile.memory_bytes + part.profile.key_bytes > host.shape.memory_budget:
            host.dispatching = None
            self._fail(host, part)

    def _synthesized(self, host: _Host, part: _Part) -> None:
        host.synthesizing -= 1
        host.wake()
        part.state = SimState.SYNTH_DONE
        heapq.heappush(host.proof_queue, (part.order, part))

    def _device_done(self, host: _Host, part: _Part) -> None:
        device_no = part.device
        device = host.devices[device_no]
        device.busy = False
        self._release(host, part, min(part.profile.abc_bytes, part.held))
        part.state = SimState.FINALIZING
        if not host.shape.split:  # the worker finishes the proof itself, then takes the next
            self.at(self.now + part.service.finalize_s, Event.FINALIZED, (host, part))
        else:
            host.idle_workers[device_no] += 1
            host.finalize_queue.append(part)
        if device.waiting:
            self._start_device(host, device_no, device.waiting.popleft())

    def _finalized(self, host: _Host, part: _Part) -> None:
        if host.shape.split:
            host.finalizers_free += 1
        else:
            host.idle_workers[part.device] += 1
        self._release(host, part, part.held)
        part.state = SimState.DONE
        self._let_go(host, part)
        job = part.job
        job.left -= 1
        if job.left == 0 and not job.failed:
            job.done_at = self.now

    # -- what a host does when something changed ----------------------------------------------

    def _settle(self, host: _Host) -> None:
        """Reserve for a waiting dispatcher, put idle workers and finalizers to work."""
        part = host.dispatching
        if part is not None and part.reserving:
            self._try_reserve(host, part)
        self._take_for_workers(host)
        while host.finalizers_free and host.finalize_queue:
            host.finalizers_free -= 1
            done = host.finalize_queue.popleft()
            self.at(self.now + done.service.finalize_s, Event.FINALIZED, (host, done))

    def _try_reserve(self, host: _Host, part: _Part) -> None:
        need = part.profile.memory_bytes
        if host.used + need + host.key_bytes > host.shape.memory_budget:
            return  # waits; a release settles the host again
        host.dispatching = None
        part.reserving = False
        host.used += need
        part.held = need
        part.state = SimState.SYNTHESIZING
        host.synthesizing += 1
        self.at(self.now + part.service.synth_s, Event.SYNTHESIZED, (host, part))

    def _take_for_workers(self, host: _Host) -> None:
        """Idle workers take the head of the proof queue, a free device's worker first."""
        while host.proof_queue:
            free = [d for d, idle in enumerate(host.idle_workers) if idle]
            if not free:
                return
            device_no = min(free, key=lambda d: (host.devices[d].busy, len(host.devices[d].waiting), d))
            _, part = heapq.heappop(host.proof_queue)
            self._poll_later(host)
            host.idle_workers[device_no] -= 1
            part.state = SimState.GPU
            part.device = device_no
            self._at_device(host, part)

    def _at_device(self, host: _Host, part: _Part) -> None:
        """The worker has the partition and asks for its device's lock: served in turn."""
        device = host.devices[part.device]
        if device.busy:
            device.waiting.append(part)
        else:
            self._start_device(host, part.device, part)

    def _start_device(self, host: _Host, device_no: int, part: _Part) -> None:
        host.devices[device_no].busy = True
        self.at(self.now + part.service.device_s, Event.DEVICE_DONE, (host, part))

    def _poll_later(self, host: _Host) -> None:
        """The queue got shorter, which wakes no dispatcher: a sleeping one sees it at its next poll."""
        wake_at = host.next_poll(self.now)
        if wake_at is not None and host.wake_at is None:
            host.wake_at = wake_at
            self.at(wake_at, Event.WAKE, host)

    def _dispatch(self) -> None:
        """Every awake dispatcher with room claims the next partitions in the claims' order; one
        without room goes to sleep (HostShape.claim_poll_s)."""
        if not self.open:
            return
        for host in self.hosts:
            while host.dispatching is None and host.asleep_since is None:
                if not host.has_room():
                    if host.shape.claim_poll_s > 0:
                        host.asleep_since = self.now
                    break
                if not self.pending:
                    break
                _, part = heapq.heappop(self.pending)
                self._claim(host, part)

    def _claim(self, host: _Host, part: _Part) -> None:
        part.state = SimState.RESERVING
        job = part.job
        if job.first_claim is None:
            job.first_claim = self.now
        host.dispatching = part
        circuit = job.arrival.circuit
        held = host.holders.get(circuit, 0)
        if held == 0:
            host.key_bytes += part.profile.key_bytes
        host.holders[circuit] = held + 1
        self.at(self.now + part.profile.dispatch_s, Event.RESERVED, (host, part))

    # -- memory and failure --------------------------------------------------------------------

    def _release(self, host: _Host, part: _Part, nbytes: int) -> None:
        host.used -= nbytes
        part.held -= nbytes

    def _let_go(self, host: _Host, part: _Part) -> None:
        """The host holds one partition fewer of its circuit (its key may go when none is left)."""
        circuit = part.job.arrival.circuit
        host.holders[circuit] -= 1
        if host.holders[circuit] == 0:
            host.key_bytes -= part.profile.key_bytes

    def _fail(self, host: _Host, part: _Part) -> None:
        """A partition that can never fit the budget fails, and its job with it (the engine's
        MemoryBudgetError is not retried); the job's other partitions still run."""
        part.state = SimState.FAILED
        self._let_go(host, part)
        part.job.failed = True
        part.job.left -= 1

    # -- the result ------------------------------------------------------------------------------

    def outcome(self) -> Outcome:
        jobs = [self._outcome_of(job) for job in self.jobs]
        end = max((p.job.done_at or 0.0 for p in self.parts), default=0.0)
        span = max(self.scenario.span_s, end)
        done = sum(1 for p in self.parts if p.state is SimState.DONE)
        failed = sum(1 for p in self.parts if p.state is SimState.FAILED)
        shape = self.scenario.host
        return Outcome(jobs, done, failed, end, span, self.scenario.hosts, shape.cost_per_hour)

    def _outcome_of(self, job: _Job) -> JobOutcome:
        a = job.arrival
        claim = None if job.first_claim is None else job.first_claim - a.at_s
        done = None if job.done_at is None else job.done_at - a.at_s
        missed = None if a.deadline_s is None else (done is None or done > a.deadline_s)
        return JobOutcome(a.job, a.circuit, claim, done, missed, job.failed)


def simulate(scenario: Scenario) -> Outcome:
    """Replay the scenario's arrivals on its hosts; every partition ends done or failed."""
    if scenario.hosts < 1:
        raise ValueError("a farm has at least one host")
    unknown = {a.circuit for a in scenario.arrivals} - set(scenario.profiles)
    if unknown:
        raise ValueError(f"no recorded service times for {', '.join(sorted(unknown))}")
    if any(not scenario.profiles[a.circuit].services for a in scenario.arrivals):
        raise ValueError("a circuit's profile has no recorded partitions")
    farm = _Farm(scenario)
    farm.run()
    return farm.outcome()

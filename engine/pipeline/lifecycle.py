"""A partition's life on this host, as one pure state machine: events in, instructions out.

    step(state, event) -> (state, instructions)

No thread, lock, database or clock here (the model is dask's worker state machine). The
engine's threads and pools only carry instructions out and post the events that follow
(engine.pipeline.inflight.InFlight.run); the tests drive this function alone, with every
cancel and failure in every phase.

The normal life, with the stage that carries each instruction out:

    CLAIMED ─Start─► RESERVING ─Reserved─► STARTING ─Recorded─► SYNTHESIZING
      [Reserve: reserve]       [Record synthesizing: synthesize]  [Synthesize: synthesize]
    ─Synthesized─► SYNTHESIZED ─Recorded─► WAITING ─Taken─► OCCUPYING ─Recorded─► PROVING
      [Record synth_done]        [Enqueue]          [Record gpu: prove]  [Launch: prove]
    ─Launched─► LAUNCHED ─Recorded─► FINISHING ─Proved─► RECORDING ─Recorded─► DONE
      [Record finalizing]  [Release a/b/c: reserve,     [Record done:    [Release the rest:
                            Finish: finalize]            finalize]         reserve]

What a partition holds: its key (from the host's key cache), its memory reservation and the
shared blocks its synthesis writes into (``KEY``, ``MEMORY``, ``ABC``, all taken by one
``Reserve``), and once launched the launch itself (``LAUNCH``: its device memory, its pending
proof), which ``Finish`` consumes. Each is released exactly once, whatever happens: the
a/b/c block as soon as the device has them, the rest when the partition ends.

A cancel (the sweep: the record moved on) or the engine stopping may come in any phase. A
partition at rest (claimed, waiting for a worker) ends at once; one a stage is working on is
marked ``cancelled`` and ends when that stage reports back, its work thrown away. A write the
records refuse (fenced, cancelled) ends the partition with nothing more recorded; a failure
records ``failed`` once, with its reason, and releases what is held.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from engine.states import PartitionState

P = PartitionState


class Phase(enum.Enum):
    CLAIMED = "claimed"  # loaded from its claim; nothing held
    RESERVING = "reserving"  # its key, memory and blocks being held
    STARTING = "starting"  # held; `synthesizing` being recorded
    SYNTHESIZING = "synthesizing"  # in a synthesis process
    SYNTHESIZED = "synthesized"  # `synth_done` being recorded
    WAITING = "waiting"  # in the proof queue, for a worker
    OCCUPYING = "occupying"  # taken by a worker: `gpu` (with it) being recorded
    PROVING = "proving"  # the launch: the device's lock, its kernels
    LAUNCHED = "launched"  # `finalizing` being recorded
    FINISHING = "finishing"  # with a finalizer: waited for, finished on the CPU, verified
    RECORDING = "recording"  # `done` being recorded
    DONE = "done"
    FAILED = "failed"
    DROPPED = "dropped"  # cancelled, fenced, handed back: nothing recorded by this host

    @property
    def ended(self) -> bool:
        return self in ENDED


ENDED = frozenset({Phase.DONE, Phase.FAILED, Phase.DROPPED})


class Hold(enum.Enum):
    KEY = "key"  # checked out of the host's key cache (or the client's own, read per job)
    MEMORY = "memory"  # the partition's memory reservation, less its a/b/c share
    ABC = "abc"  # the a/b/c block and its share of the reservation: free once on the device
    LAUNCH = "launch"  # the launch's device memory and pending proof; Finish consumes it


RESERVED = frozenset({Hold.KEY, Hold.MEMORY, Hold.ABC})


class Outcome(enum.Enum):
    """How a reservation that could not be made ends."""

    FAIL = "fail"  # it can never be held (larger than the budget, no such key): failed, not retried
    HAND_BACK = "hand back"  # this host will not prove it (another host's key): back to the queue
    DROP = "drop"  # cancelled (or the engine stopping) while it waited


# ---- events ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Start:
    """The dispatcher starts a claimed partition."""


@dataclass(frozen=True)
class Reserved:
    pass


@dataclass(frozen=True)
class NotReserved:
    reason: str
    outcome: Outcome
    retryable: bool = False  # for FAIL: whether another attempt may get it (a compile's process died)


@dataclass(frozen=True)
class Recorded:
    """The transition last asked for is written."""


@dataclass(frozen=True)
class Refused:
    """The records would not take the transition last asked for (fenced, cancelled, or the
    database away past every retry): nothing more is recorded by this host."""


@dataclass(frozen=True)
class Synthesized:
    pass


@dataclass(frozen=True)
class Taken:
    """A proving worker took it from the proof queue."""


@dataclass(frozen=True)
class Launched:
    pass


@dataclass(frozen=True)
class Proved:
    pass


@dataclass(frozen=True)
class Failed:
    """The stage working on it failed: its synthesis, launch or finish."""

    reason: str
    retryable: bool


@dataclass(frozen=True)
class Abandoned:
    """The stage working on it saw it cancelled and stopped (the prover's abort)."""


@dataclass(frozen=True)
class Cancelled:
    """The sweep: its record moved on (cancelled, requeued, fenced)."""


@dataclass(frozen=True)
class Stopping:
    """The engine stops before it is finished: handed back to the queue."""


Event = (Start | Reserved | NotReserved | Recorded | Refused | Synthesized | Taken | Launched | Proved | Failed
         | Abandoned | Cancelled | Stopping)


# ---- instructions ------------------------------------------------------------------------


@dataclass(frozen=True)
class Reserve:
    pass


@dataclass(frozen=True)
class Record:
    target: str  # a PartitionState


@dataclass(frozen=True)
class Synthesize:
    pass


@dataclass(frozen=True)
class Enqueue:
    pass


@dataclass(frozen=True)
class Dequeue:
    pass


@dataclass(frozen=True)
class Launch:
    pass


@dataclass(frozen=True)
class Finish:
    pass


@dataclass(frozen=True)
class Fail:
    """Record ``failed`` with the reason (the records may refuse it: it ends either way)."""

    reason: str
    retryable: bool


@dataclass(frozen=True)
class HandBack:
    reason: str


@dataclass(frozen=True)
class Release:
    holds: frozenset[Hold]


Instruction = Reserve | Record | Synthesize | Enqueue | Dequeue | Launch | Finish | Fail | HandBack | Release
# The instructions whose outcome is the partition's next event (Recorded or Refused, Reserved
# or NotReserved, Launched …): at most one per step, and last.
ANSWERED = (Reserve, Record, Launch)


# ---- state ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class State:
    phase: Phase = Phase.CLAIMED
    holds: frozenset[Hold] = field(default_factory=frozenset)
    cancelled: bool = False  # the records moved on while a stage worked on it: its result is thrown away
    handed_back: bool = False

    @property
    def ended(self) -> bool:
        return self.phase.ended


STOPPING_REASON = "handed back: engine stopping"

# The record each recording phase waits for, and the phase it leads to once written.
_RECORDING = {
    Phase.STARTING: (P.SYNTHESIZING, Phase.SYNTHESIZING),
    Phase.SYNTHESIZED: (P.SYNTH_DONE, Phase.WAITING),
    Phase.OCCUPYING: (P.GPU, Phase.PROVING),
    Phase.LAUNCHED: (P.FINALIZING, Phase.FINISHING),
    Phase.RECORDING: (P.DONE, Phase.DONE),
}
# What the next phase's work is, once its record is written.
_NEXT_WORK: dict[Phase, list[Instruction]] = {
    Phase.SYNTHESIZING: [Synthesize()],
    Phase.WAITING: [Enqueue()],
    Phase.PROVING: [Launch()],
}
# Phases in which a stage works on the partition: a cancel marks it, the stage ends it.
_WORKED_ON = frozenset({Phase.RESERVING, Phase.SYNTHESIZING, Phase.PROVING, Phase.FINISHING, *_RECORDING})


def _end(state: State, phase: Phase, *first: Instruction) -> tuple[State, list[Instruction]]:
    """Ended in ``phase``: everything still held released, after ``first``."""
    out = list(first)
    if state.holds:
        out.append(Release(state.holds))
    return replace(state, phase=phase, holds=frozenset()), out


def _drop(state: State) -> tuple[State, list[Instruction]]:
    return _end(state, Phase.DROPPED)


def step(state: State, event: Event) -> tuple[State, list[Instruction]]:
    """The next state and what to do, for ``event`` in ``state``. An event a phase does not
    expect (a late report about a partition that has ended) changes nothing."""
    phase = state.phase
    if phase.ended:
        return state, []
    match event:
        case Cancelled() | Stopping():
            return _cancel(state, event)
        case Start() if phase is Phase.CLAIMED:
            if state.cancelled:
                return _drop(state)
            return replace(state, phase=Phase.RESERVING), [Reserve()]
        case Reserved() if phase is Phase.RESERVING:
            held = replace(state, holds=state.holds | RESERVED)
            if state.cancelled:
                return _drop(held)
            return replace(held, phase=Phase.STARTING), [Record(P.SYNTHESIZING)]
        case NotReserved(reason=reason, outcome=outcome, retryable=retryable) if phase is Phase.RESERVING:
            if outcome is Outcome.FAIL:
                return _end(state, Phase.FAILED, Fail(reason, retryable))
            if outcome is Outcome.HAND_BACK and not state.handed_back:
                dropped, released = _drop(state)
                return replace(dropped, handed_back=True), [HandBack(reason), *released]
            return _drop(state)
        case Recorded() if phase in _RECORDING:
            _, after = _RECORDING[phase]
            if after is Phase.DONE:
                return _end(state, Phase.DONE)
            if state.cancelled:
                return _drop(state)
            if after is Phase.FINISHING:  # the device has a/b/c; the finalizer takes the launch over
                return (replace(state, phase=after, holds=state.holds - {Hold.ABC, Hold.LAUNCH}),
                        [Release(frozenset({Hold.ABC})), Finish()])
            return replace(state, phase=after), list(_NEXT_WORK[after])
        case Refused() if phase in _RECORDING:
            return _drop(state)
        case Synthesized() if phase is Phase.SYNTHESIZING:
            if state.cancelled:
                return _drop(state)
            return replace(state, phase=Phase.SYNTHESIZED), [Record(P.SYNTH_DONE)]
        case Taken() if phase is Phase.WAITING:
            return replace(state, phase=Phase.OCCUPYING), [Record(P.GPU)]
        case Launched() if phase is Phase.PROVING:
            launched = replace(state, holds=state.holds | {Hold.LAUNCH})
            if state.cancelled:
                return _drop(launched)
            return replace(launched, phase=Phase.LAUNCHED), [Record(P.FINALIZING)]
        case Proved() if phase is Phase.FINISHING:
            if state.cancelled:
                return _drop(state)
            return replace(state, phase=Phase.RECORDING), [Record(P.DONE)]
        case Failed(reason=reason, retryable=retryable) if phase in (Phase.SYNTHESIZING, Phase.PROVING,
                                                                     Phase.FINISHING):
            if state.cancelled:
                return _drop(state)
            return _end(state, Phase.FAILED, Fail(reason, retryable))
        case Abandoned() if phase in (Phase.RESERVING, Phase.SYNTHESIZING, Phase.PROVING, Phase.FINISHING):
            return _drop(state)
    return state, []


def _cancel(state: State, event: Cancelled | Stopping) -> tuple[State, list[Instruction]]:
    """The records moved on, or the engine stops: a partition at rest ends now (a stopping
    engine hands it back first); one a stage works on is marked, and ends when the stage
    reports back."""
    first: list[Instruction] = []
    if isinstance(event, Stopping) and not state.handed_back:
        first.append(HandBack(STOPPING_REASON))
        state = replace(state, handed_back=True)
    if state.phase is Phase.CLAIMED:
        return _end(state, Phase.DROPPED, *first)
    if state.phase is Phase.WAITING:
        return _end(state, Phase.DROPPED, *first, Dequeue())
    if state.phase in _WORKED_ON:
        return replace(state, cancelled=True), first
    return state, first

"""A partition's lifecycle (engine.pipeline.lifecycle) driven directly: no thread, no database.

A small model of the engine stands in for the stages: it answers each instruction as its
executor would (a reservation made or not, a record written or refused, a launch done or
failed), keeps what the partition holds, and counts what was recorded. Every cancel and every
failure in every phase is tried, and hypothesis runs whole lives of random answers with
cancels and stops at random points: each ends, releases each thing it held exactly once,
and records nothing twice.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.pipeline.lifecycle import (
    ANSWERED,
    RESERVED,
    Abandoned,
    Cancelled,
    Dequeue,
    Enqueue,
    Event,
    Fail,
    Failed,
    Finish,
    HandBack,
    Hold,
    Instruction,
    Launch,
    Launched,
    NotReserved,
    Outcome,
    Phase,
    Proved,
    Record,
    Recorded,
    Refused,
    Release,
    Reserve,
    Reserved,
    Start,
    State,
    Stopping,
    Synthesize,
    Synthesized,
    Taken,
    step,
)
from engine.states import PartitionState

P = PartitionState


@dataclass
class Model:
    """What the stages would see of one partition: its state, what it holds, what was written."""

    state: State = field(default_factory=State)
    held: Counter[Hold] = field(default_factory=Counter)
    released: Counter[Hold] = field(default_factory=Counter)
    records: list[str] = field(default_factory=list)  # asked for
    written: list[str] = field(default_factory=list)  # and answered Recorded
    failures: list[Fail] = field(default_factory=list)
    hand_backs: int = 0
    queued: bool = False
    log: list[Instruction] = field(default_factory=list)

    def post(self, event: Event) -> list[Instruction]:
        if isinstance(event, Taken) and self.state.phase is Phase.WAITING:
            self.queued = False  # a worker took it off the queue
        if isinstance(event, Recorded) and self.state.phase in RECORDING_PHASES:
            self.written.append(self.records[-1])
        self.state, out = step(self.state, event)
        answered = [i for i, instruction in enumerate(out) if isinstance(instruction, ANSWERED)]
        assert len(answered) <= 1 and (not answered or answered[0] == len(out) - 1), out
        for instruction in out:
            self.apply(instruction)
        self.log += out
        return out

    def apply(self, instruction: Instruction) -> None:
        match instruction:
            case Release(holds=holds):
                for hold in holds:
                    assert self.held[hold] == 1, f"{hold} released but not held: {self.log}"
                    self.held[hold] -= 1
                    self.released[hold] += 1
            case Finish():  # the finalizer takes the launch over: its device memory ends with it
                assert self.held[Hold.LAUNCH] == 1
                self.held[Hold.LAUNCH] -= 1
                self.released[Hold.LAUNCH] += 1
            case Record(target=target):
                self.records.append(target)
            case Fail():
                self.failures.append(instruction)
            case HandBack():
                self.hand_backs += 1
            case Enqueue():
                self.queued = True
            case Dequeue():
                assert self.queued
                self.queued = False

    def answer(self, instruction: Instruction, ok: bool = True) -> Event:
        """The event the stage posts once it has carried ``instruction`` out."""
        match instruction:
            case Reserve():
                if ok:
                    for hold in RESERVED:
                        self.held[hold] += 1
                    return Reserved()
                return NotReserved("does not fit", Outcome.FAIL)
            case Record():
                return Recorded() if ok else Refused()
            case Launch():
                if ok:
                    self.held[Hold.LAUNCH] += 1
                    return Launched()
                return Failed("kernel error", retryable=True)
        raise AssertionError(f"no answer to {instruction}")

    def check_ended(self) -> None:
        assert self.state.ended, self.state
        assert +self.held == Counter(), f"still held at the end: {+self.held} ({self.log})"
        assert all(n == 1 for n in self.released.values()), self.released
        assert all(n == 1 for n in Counter(self.records).values()), f"recorded twice: {self.records}"
        assert len(self.failures) <= 1 and not (self.failures and P.DONE in self.written)
        assert not self.queued


RECORDING_PHASES = (Phase.STARTING, Phase.SYNTHESIZED, Phase.OCCUPYING, Phase.LAUNCHED, Phase.RECORDING)
# The events each stage posts after the instruction it was given, in the normal life.
NORMAL: list[Event] = [Start(), Reserved(), Recorded(), Synthesized(), Recorded(), Taken(), Recorded(), Launched(), Recorded(),
          Proved(), Recorded()]


def live(model: Model, events: list[Event]) -> None:
    """Post ``events`` in turn, the model holding what each answered instruction gives."""
    for event in events:
        if isinstance(event, Reserved):
            for hold in RESERVED:
                model.held[hold] += 1
        if isinstance(event, Launched):
            model.held[Hold.LAUNCH] += 1
        model.post(event)


def test_the_normal_life_records_each_phase_once_and_releases_everything_once() -> None:
    model = Model()
    live(model, NORMAL)
    assert model.state.phase is Phase.DONE
    assert model.records == [P.SYNTHESIZING, P.SYNTH_DONE, P.GPU, P.FINALIZING, P.DONE]
    assert [type(i) for i in model.log] == [Reserve, Record, Synthesize, Record, Enqueue, Record, Launch, Record,
                                            Release, Finish, Record, Release]
    # a/b/c go as soon as the device has them, the rest once done is recorded
    releases = [i.holds for i in model.log if isinstance(i, Release)]
    assert releases == [frozenset({Hold.ABC}), frozenset({Hold.KEY, Hold.MEMORY})]
    model.check_ended()


def phases_of_the_normal_life() -> list[tuple[Phase, list[Event]]]:
    """Each phase the normal life passes through, with the events that lead to it."""
    out: list[tuple[Phase, list[Event]]] = []
    model = Model()
    for n, event in enumerate(NORMAL):
        out.append((model.state.phase, NORMAL[:n]))
        live(model, [event])
    return out


def finish_after(model: Model, ok: bool = True) -> None:
    """Carry the model's life on, answering as the stages would, until it ends."""
    for _ in range(40):
        if model.state.ended:
            return
        phase = model.state.phase
        pending = [i for i in model.log if isinstance(i, ANSWERED)]
        if phase is Phase.RESERVING:
            event = Abandoned() if model.state.cancelled else model.answer(Reserve(), ok)
        elif phase in (Phase.STARTING, Phase.SYNTHESIZED, Phase.OCCUPYING, Phase.LAUNCHED, Phase.RECORDING):
            event = model.answer(pending[-1], ok and not model.state.cancelled)
        elif phase is Phase.SYNTHESIZING:
            event = Synthesized() if ok else Failed("bad inputs", retryable=False)
        elif phase is Phase.WAITING:
            event = Taken()
        elif phase is Phase.PROVING:
            event = Abandoned() if model.state.cancelled else model.answer(Launch(), ok)
        elif phase is Phase.FINISHING:
            event = Abandoned() if model.state.cancelled else (Proved() if ok else Failed("unverified", True))
        else:  # CLAIMED
            event = Start()
        model.post(event)
    raise AssertionError(f"never ended: {model.state} {model.log}")


def test_a_cancel_in_every_phase_ends_it_releasing_everything_once_and_recording_nothing_after() -> None:
    for phase, before in phases_of_the_normal_life():
        for cancel in (Cancelled(), Stopping()):
            model = Model()
            live(model, before)
            assert model.state.phase is phase
            written = len(model.records)
            model.post(cancel)
            finish_after(model)
            model.check_ended()
            assert model.state.phase in (Phase.DROPPED, Phase.DONE), (phase, model.state)
            if model.state.phase is Phase.DROPPED:  # nothing recorded once it knew of the cancel
                assert len(model.records) <= written + 1, (phase, model.records)
                assert P.DONE not in model.written
            assert model.hand_backs == (1 if isinstance(cancel, Stopping) else 0), (phase, cancel)


def test_a_failure_in_every_phase_ends_it_recording_the_failure_once_and_releasing_everything_once() -> None:
    for phase, before in phases_of_the_normal_life():
        model = Model()
        live(model, before)
        finish_after(model, ok=False)
        model.check_ended()
        assert model.state.phase in (Phase.FAILED, Phase.DROPPED), (phase, model.state)
        assert len(model.failures) == (1 if model.state.phase is Phase.FAILED else 0)


def test_a_reservation_that_cannot_be_made_fails_hands_back_or_drops_holding_nothing() -> None:
    for outcome, phase, hand_backs, failures in ((Outcome.FAIL, Phase.FAILED, 0, 1),
                                                 (Outcome.HAND_BACK, Phase.DROPPED, 1, 0),
                                                 (Outcome.DROP, Phase.DROPPED, 0, 0)):
        model = Model()
        model.post(Start())
        model.post(NotReserved("why", outcome))
        assert model.state.phase is phase and model.hand_backs == hand_backs and len(model.failures) == failures
        assert not any(isinstance(i, Release) for i in model.log)
        model.check_ended()


def test_a_partition_waiting_for_a_worker_is_taken_off_the_queue_when_cancelled() -> None:
    model = Model()
    live(model, NORMAL[:5])
    assert model.state.phase is Phase.WAITING and model.queued
    out = model.post(Cancelled())
    assert isinstance(out[0], Dequeue) and isinstance(out[-1], Release)
    model.check_ended()


def test_a_cancel_during_the_launch_is_seen_by_the_prover_and_frees_the_launch_too() -> None:
    model = Model()
    live(model, NORMAL[:7])
    assert model.state.phase is Phase.PROVING
    assert model.post(Cancelled()) == [] and model.state.cancelled  # the prover's abort check reads it
    live(model, [Launched()])  # the launch got there first: thrown away, its device memory given back
    assert model.state.phase is Phase.DROPPED
    assert model.log[-1] == Release(frozenset({Hold.KEY, Hold.MEMORY, Hold.ABC, Hold.LAUNCH}))
    model.check_ended()


def test_late_reports_about_an_ended_partition_change_nothing() -> None:
    model = Model()
    live(model, NORMAL)
    for event in (Cancelled(), Stopping(), Recorded(), Refused(), Proved(), Failed("x", True), Abandoned()):
        assert model.post(event) == []
    model.check_ended()


EVENTS = st.sampled_from([Start(), Reserved(), NotReserved("x", Outcome.FAIL), NotReserved("x", Outcome.HAND_BACK),
                          NotReserved("x", Outcome.DROP), Recorded(), Refused(), Synthesized(), Taken(), Launched(),
                          Proved(), Failed("x", True), Failed("x", False), Abandoned(), Cancelled(), Stopping()])


@settings(max_examples=400, deadline=None)
@given(st.lists(EVENTS, max_size=30))
def test_any_sequence_of_events_never_releases_twice_nor_records_twice(events: list[Event]) -> None:
    """Whatever arrives in whatever order (late, duplicated, out of place): a hold is released
    only while held, a target recorded at most once, a failure at most once, and an ended
    partition does nothing more."""
    model = Model()
    for event in events:
        was_ended = model.state.ended
        # what the stages would hold had they carried the instruction out: only what was asked
        if isinstance(event, Reserved) and model.state.phase is Phase.RESERVING:
            for hold in RESERVED:
                model.held[hold] += 1
        if isinstance(event, Launched) and model.state.phase is Phase.PROVING:
            model.held[Hold.LAUNCH] += 1
        out = model.post(event)
        assert not (was_ended and out)
    assert all(n == 1 for n in Counter(model.records).values()), model.records
    assert len(model.failures) <= 1
    assert all(n == 1 for n in model.released.values())
    if model.state.ended:
        assert +model.held == Counter(), (model.held, model.log)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=20), st.integers(0, 20), st.sampled_from(["cancel", "stop", ""]))
def test_every_life_with_any_answers_and_a_cancel_anywhere_ends_with_everything_released_once(
        answers: list[bool], cancel_at: int, cancel: str) -> None:
    """The stages answer each instruction yes or no at random, and a cancel or a stop may come
    between any two steps: the partition always ends, holding nothing."""
    model = Model()
    oks = iter(answers * 3)
    for n in range(60):
        if model.state.ended:
            break
        if n == cancel_at and cancel:
            model.post(Cancelled() if cancel == "cancel" else Stopping())
            continue
        before = model.state
        finish_one(model, next(oks, True))
        assert model.state != before or model.state.ended
    finish_after(model)
    model.check_ended()
    if cancel == "stop" and cancel_at < n:
        assert model.hand_backs <= 1


def finish_one(model: Model, ok: bool) -> None:
    """One step of finish_after."""
    phase = model.state.phase
    pending = [i for i in model.log if isinstance(i, ANSWERED)]
    if phase is Phase.CLAIMED:
        model.post(Start())
    elif phase is Phase.RESERVING:
        model.post(Abandoned() if model.state.cancelled else model.answer(Reserve(), ok))
    elif phase in (Phase.STARTING, Phase.SYNTHESIZED, Phase.OCCUPYING, Phase.LAUNCHED, Phase.RECORDING):
        model.post(model.answer(pending[-1], ok))
    elif phase is Phase.SYNTHESIZING:
        model.post(Synthesized() if ok else Failed("bad inputs", retryable=False))
    elif phase is Phase.WAITING:
        model.post(Taken())
    elif phase is Phase.PROVING:
        model.post(Abandoned() if model.state.cancelled else model.answer(Launch(), ok))
    elif phase is Phase.FINISHING:
        model.post(Abandoned() if model.state.cancelled else (Proved() if ok else Failed("unverified", True)))

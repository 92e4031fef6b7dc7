"""The pipeline's shape (issue 46): one writer for each field of a work item, and one item
followed from its claim to its record goes back at most twice to a stage it had left.

The first reads the pipeline's source: every assignment to a field of a work item, or to an
attribute of one (``item.launch.pending = …``), is counted against the module that makes it.

The second follows a real partition through a real engine: every instruction its lifecycle
gave was carried out by a stage (the module of the executor the engine wired for it), and the
stages it passed through, in order, are claim, reserve, synthesize, prove, reserve (its a/b/c
given back once on the device), finalize, reserve (the rest given back once done is recorded).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from engine.pipeline import lifecycle as lc
from engine.pipeline.inflight import InFlight
from engine.pipeline.work import WorkItem

PIPELINE = Path(__file__).resolve().parents[2] / "engine" / "pipeline"
HOLDINGS = {"state", "held", "synthesized", "launch", "proof"}
FACTS = {f.name for f in fields(WorkItem)} - HOLDINGS - {"lock"}


def _chain(node: ast.expr) -> list[str]:
    names: list[str] = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        names.append(node.id)
    return names[::-1]


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        found = []
        for target in node.targets:
            found += list(target.elts) if isinstance(target, ast.Tuple) else [target]
        return found
    if isinstance(node, ast.AugAssign | ast.AnnAssign):
        return [node.target]
    return []


def writers() -> dict[str, set[str]]:
    """For each field of a work item, the pipeline modules that write it (or into it, also
    through a local name for it: ``launch = item.launch; launch.pending = …``)."""
    out: dict[str, set[str]] = defaultdict(set)
    for path in sorted(PIPELINE.glob("*.py")):
        tree = ast.parse(path.read_text())
        for function in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)] + [tree]:
            aliases = {}
            for node in ast.walk(function):
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute):
                    chain = _chain(node.value)
                    if len(chain) == 2 and chain[0] != "self" and chain[1] in HOLDINGS:
                        for target in node.targets:
                            names = target.elts if isinstance(target, ast.Tuple) else [target]
                            aliases.update({n.id: chain[1] for n in names if isinstance(n, ast.Name)})
            for node in ast.walk(function):
                for target in _targets(node):
                    chain = _chain(target)
                    if len(chain) >= 2 and chain[0] in aliases:
                        out[aliases[chain[0]]].add(path.stem)
                    # a work item is never ``self`` in the pipeline: its fields are written from outside
                    elif len(chain) >= 2 and chain[0] != "self" and chain[1] in HOLDINGS | FACTS:
                        out[chain[1]].add(path.stem)
    return out


def test_no_field_of_a_work_item_is_written_by_more_than_one_stage() -> None:
    found = writers()
    assert {name: sorted(mods) for name, mods in found.items() if len(mods) > 1} == {}
    assert {name: sorted(found[name]) for name in FACTS if found.get(name)} == {}, "a fact was written after load"
    # each holding has its one writer, the one the work item's docstring names
    assert {name: sorted(mods) for name, mods in found.items()} == {
        "state": ["inflight"], "held": ["reserve"], "synthesized": ["synthesize"], "launch": ["prove"],
        "proof": ["finalize"]}


def returns_to_left(stages: list[str]) -> int:
    """How many times a walk through ``stages`` comes back to one it had left."""
    walk = [s for n, s in enumerate(stages) if n == 0 or stages[n - 1] != s]
    return sum(1 for n, s in enumerate(walk) if s in walk[:n])


@pytest.mark.django_db(transaction=True)
def test_one_partition_from_claim_to_record_goes_back_at_most_twice_to_a_stage_it_had_left(
        start_engine, monkeypatch) -> None:
    from tests.engine.test_drain import winning_post

    carried: list[tuple[int, str, str]] = []  # (partition, instruction, module of its executor)
    real = InFlight.carry_out

    def carry_out(self: InFlight, item: WorkItem, instruction: lc.Instruction) -> Any:
        owners: list[tuple[type, Any]]
        if isinstance(instruction, lc.Release):
            owners = [(lc.Release, lc.Hold.LAUNCH)] if lc.Hold.LAUNCH in instruction.holds else []
            owners += [(lc.Release, None)] if instruction.holds - {lc.Hold.LAUNCH} else []
        elif isinstance(instruction, lc.Record):
            owners = [(lc.Record, instruction.target)]
        else:
            owners = [(type(instruction), None)]
        for owner in owners:
            executor: Any = self.executors[owner]  # a stage's bound method
            carried.append((item.claim.partition_id, type(instruction).__name__, executor.__func__.__module__))
        return real(self, item, instruction)

    monkeypatch.setattr(InFlight, "carry_out", carry_out)
    engine = start_engine()
    job = winning_post("followed")
    assert engine.run_until_idle(timeout=120)
    job.refresh_from_db()
    assert job.state == "done", job.error

    stages = ["claim"] + [module.rsplit(".", 1)[1] for _, _, module in carried]  # the dispatcher posts Start
    assert [name for _, name, _ in carried] == ["Reserve", "Record", "Synthesize", "Record", "Enqueue", "Record",
                                                "Launch", "Record", "Release", "Finish", "Record", "Release"]
    walk = [s for n, s in enumerate(stages) if n == 0 or stages[n - 1] != s]
    assert walk == ["claim", "reserve", "synthesize", "prove", "reserve", "finalize", "reserve"]
    assert returns_to_left(stages) == 2

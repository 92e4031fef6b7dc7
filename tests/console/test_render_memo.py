"""The pipelines panel keeps the cells it made and remakes only those whose partition moved:
what it shows is what a pass that made everything afresh shows."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from engine.console import markup
from engine.console.render import render
from engine.states import PartitionState
from tests.console.conftest import SNAP_ID, Farm, move

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def one_moment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every pass at the same server time, so two passes' ticking texts agree."""
    moment = timezone.now()
    monkeypatch.setattr("engine.console.render.timezone.now", lambda: moment)


def afresh() -> dict[str, tuple[str | None, str]]:
    markup._MEMO.kept.clear()
    return units()


def units() -> dict[str, tuple[str | None, str]]:
    rendered = render(["pipelines"])
    return {key: (unit.html, unit.digest) for key, unit in rendered.units.items()}


def test_a_cell_whose_partition_moved_is_remade_and_the_rest_kept(farm: Farm) -> None:
    units()  # the cells are made and kept
    move(SNAP_ID, 5, PartitionState.SYNTHESIZING, host=farm.host, synth_started_at=timezone.now())
    kept = units()
    assert kept == afresh()
    pk = farm.snap.pk
    assert 'data-state="synthesizing"' in (kept[f"pipelines/{pk}/5"][0] or "")


def test_a_running_phase_ticks_in_a_kept_cell_as_in_a_new_one(farm: Farm) -> None:
    move(SNAP_ID, 5, PartitionState.GPU, worker=farm.w0, host=farm.host,
         gpu_started_at=timezone.now() - timedelta(seconds=3))
    before = units()[f"pipelines/{farm.snap.pk}/5"]
    after = units()[f"pipelines/{farm.snap.pk}/5"]
    assert "data-started-at" in (after[0] or "") and after[1] == before[1]
    assert after == afresh()[f"pipelines/{farm.snap.pk}/5"]


def test_a_quiet_panel_whose_content_stayed_is_the_unit_the_last_pass_made(farm: Farm) -> None:
    first = render(["counters"]).units["counters"]
    move(SNAP_ID, 3, PartitionState.SYNTH_DONE, synth_finished_at=timezone.now())  # no job or pending count moved
    assert render(["counters"]).units["counters"] is first


def test_a_quiet_panel_whose_content_moved_is_rendered_as_a_fresh_pass_renders_it(farm: Farm) -> None:
    before = render(["counters", "synthesis"]).units
    move(SNAP_ID, 6, PartitionState.SYNTHESIZING, host=farm.host, synth_started_at=timezone.now())
    after = render(["counters", "synthesis"]).units
    assert after["synthesis"].html != before["synthesis"].html
    markup._QUIET.clear()
    assert render(["counters", "synthesis"]).units == after

"""The colour legend names every partition state's colour and the task stream's bars."""

from __future__ import annotations

import pytest
from django.test import Client

from engine.console.style import KIND_HUES, kind_colour
from engine.states import PartitionState, ProofKind
from tests.console.conftest import SNAP_ID, Farm

pytestmark = pytest.mark.django_db


def legend_of(html: str) -> str:
    return html.split('class="panel colour-legend"', 1)[1].split("</section>", 1)[0]


def test_the_console_legend_lists_every_partition_state_with_its_cell_colour(staff: Client, farm: Farm) -> None:
    legend = legend_of(staff.get("/").content.decode())
    for state in PartitionState:
        assert f'<li data-legend-state="{state}"><i class="swatch {state}"></i><b>{state}</b>' in legend


def test_the_console_legend_gives_each_kind_s_bar_colour_and_the_running_outline(staff: Client, farm: Farm) -> None:
    legend = legend_of(staff.get("/").content.decode())
    for kind in ProofKind:
        assert f'<li data-legend-kind="{kind}"><i class="swatch bar" style="background: {kind_colour(kind)}">' in legend
    assert "swatch bar running" in legend


def test_every_kind_has_a_colour_of_its_own_far_from_done_s_green() -> None:
    assert set(KIND_HUES) == {str(kind) for kind in ProofKind}
    hues = [*KIND_HUES.values(), 120]  # done's cells are green
    apart = [min(abs(a - b), 360 - abs(a - b)) for i, a in enumerate(hues) for b in hues[i + 1:]]
    assert min(apart) >= 45


def test_the_job_page_legend_lists_every_partition_state(staff: Client, farm: Farm) -> None:
    legend = legend_of(staff.get(f"/jobs/{SNAP_ID}").content.decode())
    assert all(f'data-legend-state="{state}"' in legend for state in PartitionState)

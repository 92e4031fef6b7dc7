"""A proving batch on the console and in /status: the worker card says "proving P5–P8 of
<job>" and carries data-batch, as each member's cell does; /status lists every member on the
worker; and the truth invariants hold for every member."""

from __future__ import annotations

import jsonschema
import pytest
from django.test import Client
from django.utils import timezone

from engine.api.status import status_schema
from engine.ledger.tokens import issue_token
from engine.models import Partition
from engine.states import PartitionState
from tests.console.conftest import SNAP_ID, Farm
from tests.truth import page_contradictions, status_contradictions

pytestmark = pytest.mark.django_db


@pytest.fixture
def batch(farm: Farm) -> str:
    """P5–P8 of the snap job on the GPU with W0 as one batch (P5's id its marker)."""
    members = Partition.objects.filter(job__job_id=SNAP_ID, index__in=range(5, 9))
    marker = str(members.get(index=5).pk)
    members.update(host=farm.host, state=PartitionState.GPU, worker=farm.w0, attempt=1, batch=marker,
                   synth_started_at=timezone.now(), synth_finished_at=timezone.now(), gpu_started_at=timezone.now())
    return marker


def test_the_worker_card_shows_the_batch_and_its_cells_carry_it(staff: Client, batch: str) -> None:
    html = staff.get("/").content.decode()
    members = " ".join(f"{SNAP_ID}#{i}" for i in range(5, 9))
    assert f'data-worker="gpu-host-a/cuda:0/W0" data-state="proving" data-partition="{members}"' in html
    assert f'proving P5\u2013P8 of <span class="job-id" title="{SNAP_ID}">{SNAP_ID}</span>' in html
    assert f'data-batch="{batch}">' in html  # the card
    for i in range(5, 9):
        assert f'data-partition="{SNAP_ID}#{i}" data-state="gpu" data-version="' in html
    assert html.count(f'data-batch="{batch}"') == 5  # the card and its four cells
    # the lone partition on W1 is still shown alone, without a batch
    assert f'proving P1 of <span class="job-id" title="{SNAP_ID}">{SNAP_ID}</span>' in html
    assert page_contradictions(html) == []


def test_status_lists_every_member_on_the_worker_and_holds_the_truth(batch: str) -> None:
    _, raw = issue_token("batch-dashboard", scope="operator")
    snap = Client(headers={"Authorization": f"Bearer {raw}"}).get("/status").json()
    jsonschema.validate(snap, status_schema())
    w0 = next(w for w in snap["gpu_workers"] if w["label"] == "W0")
    assert w0["state"] == "proving" and w0["current_batch"] == batch
    assert w0["current_partitions"] == [[SNAP_ID, i] for i in range(5, 9)]
    cells = {p["index"]: p for pipe in snap["pipelines"] if pipe["job_id"] == SNAP_ID for p in pipe["partitions"]}
    assert {cells[i]["batch"] for i in range(5, 9)} == {batch} and cells[1]["batch"] is None
    assert status_contradictions(snap) == []

"""The console page and the job page render the whole truth from the records, no JS needed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from engine.console import fragments
from engine.console.style import level
from engine.format import fmt_ms
from engine.ledger.tokens import issue_token
from engine.models import ProofJob, TokenScope
from engine.states import JobState
from tests.console.conftest import SNAP_ID, Farm

pytestmark = pytest.mark.django_db


def page(client: Client) -> str:
    response = client.get("/")
    assert response.status_code == 200
    return response.content.decode()


def test_anonymous_visitors_are_sent_to_log_in() -> None:
    response = Client().get("/")
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("console-login"))


def test_a_logged_in_user_outside_staff_and_operators_is_refused() -> None:
    client = Client()
    client.force_login(get_user_model().objects.create_user("visitor", password="pw-for-tests-only"))
    assert client.get("/").status_code == 403


def test_a_member_of_the_operator_group_sees_the_console(farm: Farm, operator_user: User) -> None:
    client = Client()
    client.force_login(operator_user)
    assert SNAP_ID in page(client)


def test_every_fragment_is_on_the_page_under_its_stable_id(staff: Client, farm: Farm) -> None:
    html = page(staff)
    for fragment in fragments.REGISTRY.values():
        assert f'id="{fragment.dom_id}"' in html
    assert 'sse-connect="/events/"' in html and 'id="server-clock"' in html


def test_the_full_job_id_and_kind_are_shown_never_truncated(staff: Client, farm: Farm) -> None:
    html = page(staff)
    assert f">{SNAP_ID}</a>" in html
    assert '<span class="kind">snap-update</span>' in html
    assert "1/16 done" in html


def test_partition_cells_carry_their_state_and_phase_durations(staff: Client, farm: Farm) -> None:
    html = page(staff)
    assert f'data-partition="{SNAP_ID}#0" data-state="done"' in html
    assert "587ms synth" in html and "5.2s gpu" in html
    # A running phase carries its authoritative start so the browser can tick it.
    assert re.search(rf'data-partition="{SNAP_ID}#1" data-state="gpu".*?data-started-at="\d+" data-suffix=" gpu"',
                     html, re.S)


def test_a_worker_card_says_proving_exactly_while_its_partition_is_on_the_gpu(staff: Client, farm: Farm) -> None:
    html = page(staff)
    assert f'data-worker="gpu-host-a/cuda:0/W1" data-state="proving" data-partition="{SNAP_ID}#1"' in html
    assert f"proving P1 of <span class=\"job-id\" title=\"{SNAP_ID}\">{SNAP_ID}</span>" in html
    assert 'data-worker="gpu-host-a/cuda:0/W0" data-state="idle" data-partition=""' in html


def test_cpu_slots_are_labelled_as_cpu(staff: Client, farm: Farm) -> None:
    farm.host.backend = "cpu"
    farm.host.save()
    farm.w0.device = "cpu"
    farm.w0.save()
    assert '<span class="device">CPU</span>' in page(staff)


def test_memory_is_split_by_owner_and_coloured_by_the_seed_thresholds(staff: Client, farm: Farm) -> None:
    html = page(staff)
    # three partitions' 12 GiB reservations and the two resident keys (4 GiB and 1 GiB)
    assert "41.0 GiB / 64.0 GiB (64.1%)" in html
    assert 'class="gauge split amber"' in html
    assert f"snap-update {SNAP_ID}: 36.0 GiB" in html and "key:porep-c2/tiny: 1.0 GiB" in html
    assert "snap-update/tiny</span> · 4.0 GiB · in use" in html and "porep-c2/tiny</span> · 1.0 GiB · evictable" in html


def test_gauge_levels_are_green_amber_red_at_60_and_85_percent() -> None:
    assert [level(x) for x in (0.59, 0.60, 0.84, 0.85)] == ["green", "amber", "amber", "red"]


def test_durations_read_like_the_seed_panel() -> None:
    assert [fmt_ms(x) for x in (587, 5200, 64_000)] == ["587ms", "5.2s", "1m 04s"]


def test_a_host_whose_heartbeat_stopped_is_flagged_stale(staff: Client, farm: Farm) -> None:
    from datetime import timedelta
    assert farm.host.heartbeat_at is not None
    farm.host.heartbeat_at -= timedelta(minutes=5)
    farm.host.save()
    assert 'class="host stale"' in page(staff)


def test_the_task_stream_draws_a_bar_per_gpu_phase_and_utilisation(staff: Client, farm: Farm) -> None:
    html = page(staff)
    assert html.count('<rect class="bar') == 2
    assert '<rect class="bar running"' in html
    assert re.search(r"gpu-host-a cuda:0 W0 <b>\d+\.\d%</b>", html)


def test_the_job_page_lists_partitions_with_phases_and_links(staff: Client, farm: Farm) -> None:
    response = staff.get(f"/jobs/{SNAP_ID}")
    html = response.content.decode()
    assert response.status_code == 200
    assert f"/admin/engine/proofjob/{farm.snap.pk}/change/" in html
    assert 'id="jobpart-15"' in html and '<span role="cell">P15</span>' in html
    assert "587ms" in html and "5.2s" in html


def test_the_job_page_offers_a_done_jobs_proofs_as_json(staff: Client, farm: Farm) -> None:
    farm.snap.partitions.filter(index=0).update(proof={"a": [1, 2]}, public_inputs=["7"])
    ProofJob.objects.filter(pk=farm.snap.pk).update(state=JobState.DONE, finished_at=timezone.now())
    assert "download proofs (JSON)" in staff.get(f"/jobs/{SNAP_ID}").content.decode()
    body = json.loads(staff.get(f"/jobs/{SNAP_ID}/proofs.json").content)
    assert body["job_id"] == SNAP_ID
    assert body["partitions"][0]["proof"] == {"a": [1, 2]}


@pytest.mark.parametrize("state", [JobState.RUNNING, JobState.CANCELLED, JobState.FAILED])
def test_a_job_not_done_offers_no_proofs_on_the_page_as_the_api_does(staff: Client, farm: Farm, state: str) -> None:
    # One rule for a job's proofs: served once it is done, and only then (a cancelled job's
    # partial proofs once downloaded from its page while the API answered 409).
    farm.snap.partitions.filter(index=0).update(proof={"a": [1, 2]}, public_inputs=["7"])
    ProofJob.objects.filter(pk=farm.snap.pk).update(state=state)
    assert "download proofs (JSON)" not in staff.get(f"/jobs/{SNAP_ID}").content.decode()
    _, raw = issue_token("ops", scope=TokenScope.OPERATOR)
    api = Client(headers={"Authorization": f"Bearer {raw}"}).get(f"/api/v1/jobs/{SNAP_ID}/proof")
    page = staff.get(f"/jobs/{SNAP_ID}/proofs.json")
    assert page.status_code == api.status_code == 409
    assert page.json() == api.json()


def test_an_unknown_job_is_not_found(staff: Client) -> None:
    assert staff.get("/jobs/no-such-job").status_code == 404


def test_a_job_id_is_shown_escaped_wherever_it_appears(staff: Client, farm: Farm) -> None:
    from django.utils import timezone

    from engine.models import Partition, ProofJob
    hostile = 'x"><script>alert(1)</script>&\''
    job = ProofJob.objects.create(job_id=hostile, kind="winning-post", state="running", num_partitions=1,
                                  host=farm.host, started_at=timezone.now())
    Partition.objects.create(job=job, index=0, host=farm.host, state="gpu", worker=farm.w0,
                             gpu_started_at=timezone.now())
    html = page(staff)
    assert "<script>alert(1)</script>" not in html
    escaped = 'x&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;&amp;&#x27;'
    assert f'data-partition="{escaped}#0"' in html  # its cell
    assert f'data-partition="{escaped}#0"' in html.split('id="frag-workers"', 1)[1]  # the card of W0
    assert f"P0 of {escaped} (winning-post)" in html  # its bar in the task stream


def test_the_job_page_names_each_failed_attempt_in_words_not_as_a_dict(staff: Client, farm: Farm) -> None:
    farm.snap.partitions.filter(index=0).update(errors=[
        {"attempt": 1, "host": "gpu-host-a", "at": "2026-12-03T05:00:00+00:00", "reason": "lease lapsed"},
        {"retry": True, "at": "2026-12-03T05:01:00+00:00"}])
    html = staff.get(f"/jobs/{SNAP_ID}").content.decode()
    assert "attempt 1 on gpu-host-a at 2026-12-03 05:00:00 UTC: lease lapsed" in html
    assert "{&#x27;" not in html and "{'" not in html


def test_a_done_job_offers_snarkjs_files_to_a_console_login(staff: Client, farm: Farm) -> None:
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "snarkjs" / "bn128"
    proof, public = (json.loads((fixture / name).read_text()) for name in ("proof.json", "public.json"))
    ProofJob.objects.filter(pk=farm.snap.pk).update(state=JobState.DONE, curve="bn128")
    farm.snap.partitions.update(proof=proof, public_inputs=public)
    html = staff.get(f"/jobs/{SNAP_ID}").content.decode()
    assert f'href="/jobs/{SNAP_ID}/snarkjs.json"' in html
    assert '<p class="links">\n    ·' not in html  # no stray separator
    body = json.loads(staff.get(f"/jobs/{SNAP_ID}/snarkjs.json").content)
    assert body["partitions"][0]["proof"]["pi_a"] == proof["pi_a"]
    assert body["partitions"][0]["public"] == public


def test_swaps_change_state_and_text_together_with_no_settle_step(staff: Client, farm: Farm) -> None:
    config = re.search(r"<meta name=\"htmx-config\" content='([^']+)'>", page(staff))
    assert config is not None
    assert json.loads(config.group(1)) == {"attributesToSettle": [], "defaultSettleDelay": 0}


@pytest.mark.parametrize("path", ["/", f"/jobs/{SNAP_ID}", "/jobs/", "/history/"])
def test_no_template_comment_leaks_into_a_page(staff: Client, farm: Farm, path: str) -> None:
    html = staff.get(path).content.decode()
    assert "{#" not in html and "#}" not in html and "{%" not in html


def test_only_pages_that_stream_carry_the_live_indicator(staff: Client, farm: Farm) -> None:
    streamed = re.compile(r'<body class="streamed">')
    assert streamed.search(staff.get("/").content.decode())
    assert streamed.search(staff.get(f"/jobs/{SNAP_ID}").content.decode())
    assert streamed.search(staff.get("/jobs/").content.decode())  # its table is live too
    assert not streamed.search(staff.get("/history/").content.decode())


def test_an_unknown_job_gets_the_console_s_own_not_found_page(staff: Client, farm: Farm) -> None:
    response = staff.get("/jobs/no-such-job")
    assert response.status_code == 404
    html = response.content.decode()
    assert "Nothing is recorded at <code>/jobs/no-such-job</code>" in html
    assert 'href="/jobs/"' in html and "signed in as <b>ops-lead</b>" in html


def test_the_job_page_says_which_wait_each_queue_figure_is(staff: Client, farm: Farm) -> None:
    html = staff.get(f"/jobs/{SNAP_ID}").content.decode()
    assert "(from its submission to its first claim since)" in html
    assert ">queue</span>" in html and ">reserve</span>" in html  # the partitions' own, each a column
    legend = html[html.index('id="figures-legend"'):]
    assert '<dt data-figure="queue">' in legend and '<dt data-figure="job queue">' in legend

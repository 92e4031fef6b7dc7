"""The admin is the job-history browser: lists, filters, search and read-only history."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from engine.models import EngineHost, Partition, ProofJob, Worker
from engine.states import JobState, PartitionState, ProofKind

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff() -> Client:
    user = get_user_model().objects.create_superuser("root", "", "pw-for-tests-only")
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def history() -> ProofJob:
    host = EngineHost.objects.create(name="gpu-host-a")
    worker = Worker.objects.create(host=host, device="cuda:0", ordinal=1)
    now = timezone.now()
    job = ProofJob.objects.create(
        job_id="snap-update-history-0001", kind=ProofKind.SNAP_UPDATE, state=JobState.DONE, host=host,
        num_partitions=2, started_at=now, finished_at=now + timedelta(seconds=9),
    )
    for index in range(2):
        Partition.objects.create(
            job=job, index=index, state=PartitionState.DONE, host=host, worker=worker, attempt=1,
            synth_started_at=now, synth_finished_at=now + timedelta(milliseconds=587),
            gpu_started_at=now + timedelta(seconds=1), gpu_finished_at=now + timedelta(seconds=6, milliseconds=200),
            finished_at=now + timedelta(seconds=7),
        )
    ProofJob.objects.create(job_id="window-post-queued-7", kind=ProofKind.WINDOW_POST)
    return job


def test_the_job_list_shows_kind_state_host_and_progress(staff: Client, history: ProofJob) -> None:
    page = staff.get(reverse("admin:engine_proofjob_changelist")).content.decode()
    assert "snap-update-history-0001" in page
    assert "gpu-host-a" in page
    assert "2/2" in page
    assert "window-post-queued-7" in page


@pytest.mark.parametrize("field", ["kind", "state", "host"])
def test_the_job_list_filters_down_to_the_matching_jobs(staff: Client, history: ProofJob, field: str) -> None:
    query = {"kind": "kind__exact=snap-update", "state": "state__exact=done",
             "host": f"host__id__exact={history.host_id}"}[field]
    page = staff.get(reverse("admin:engine_proofjob_changelist") + "?" + query).content.decode()
    assert "snap-update-history-0001" in page
    assert "window-post-queued-7" not in page


def test_search_by_job_id_finds_the_job(staff: Client, history: ProofJob) -> None:
    page = staff.get(reverse("admin:engine_proofjob_changelist") + "?q=history-0001").content.decode()
    assert "snap-update-history-0001" in page
    assert "window-post-queued-7" not in page


def test_the_job_page_lists_partitions_with_phase_durations_and_worker(staff: Client, history: ProofJob) -> None:
    page = staff.get(reverse("admin:engine_proofjob_change", args=[history.pk])).content.decode()
    assert "587 ms" in page
    assert "5200 ms" in page
    assert "cuda:0 W1" in page


def test_history_cannot_be_edited_by_hand(staff: Client, history: ProofJob) -> None:
    staff.post(reverse("admin:engine_proofjob_change", args=[history.pk]), {"state": "queued"})
    history.refresh_from_db()
    assert history.state == JobState.DONE
    assert staff.get(reverse("admin:engine_proofjob_add")).status_code == 403


# ---- records are views: no Save buttons, proofs folded, no deleting work in progress --------


def test_a_job_page_is_a_view_without_save_buttons(staff: Client, history: ProofJob) -> None:
    page = staff.get(reverse("admin:engine_proofjob_change", args=[history.pk])).content.decode()
    assert 'name="_save"' not in page and 'name="_continue"' not in page
    assert "snap-update-history-0001" in page


def test_a_jobs_proof_is_folded_away_until_asked_for(staff: Client, history: ProofJob) -> None:
    ProofJob.objects.filter(pk=history.pk).update(proof=[{"pi_a": ["123456789"]}])
    page = staff.get(reverse("admin:engine_proofjob_change", args=[history.pk])).content.decode()
    folded = page[page.index("<details>"):page.index("</details>")]
    assert ">Proof</h2>" in folded and "123456789" in folded


def test_a_circuit_page_is_a_view_without_save_buttons(staff: Client) -> None:
    from engine.models import Circuit

    pk = Circuit.objects.create(id="ab" * 32, curve="bn128", n_public=1, n_vars=4, domain_size=8,
                                zkey_path="/nowhere/circuit.zkey", zkey_bytes=1).pk
    response = staff.get(reverse("admin:engine_circuit_change", args=[pk]))
    assert response.status_code == 200
    assert 'name="_save"' not in response.content.decode()


def test_a_hosts_cost_per_hour_is_the_one_thing_an_operator_edits_on_its_page(staff: Client, history: ProofJob) -> None:
    url = reverse("admin:engine_enginehost_change", args=[history.host_id])
    page = staff.get(url).content.decode()
    assert 'name="cost_per_hour"' in page and 'name="name"' not in page and 'name="memory_budget_bytes"' not in page
    # posted as the browser posts the form: its hidden fields (the workers' view) and the cost
    hidden = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page))
    response = staff.post(url, {**hidden, "cost_per_hour": "2.75", "_save": "Save"})
    assert response.status_code == 302, response.content.decode()[:2000]
    host = EngineHost.objects.get(name="gpu-host-a")
    assert host.cost_per_hour == 2.75


def test_a_restart_keeps_the_admins_cost_unless_the_environment_gives_one(history: ProofJob) -> None:
    from engine.ledger.hosts import register_host, set_cost_per_hour

    host = EngineHost.objects.get(name="gpu-host-a")
    set_cost_per_hour(host, 2.75)

    def start(cost: float | None = None) -> EngineHost:
        return register_host(host.name, backend="cpu", memory_budget_bytes=2**30, memory_total_bytes=2**31,
                             synthesis_max=2, cost_per_hour=cost)

    assert start().cost_per_hour == 2.75
    assert start(4.0).cost_per_hour == 4.0


def test_cancel_still_works_from_the_job_list(staff: Client, history: ProofJob) -> None:
    queued = ProofJob.objects.get(job_id="window-post-queued-7")
    staff.post(reverse("admin:engine_proofjob_changelist"),
               {"action": "cancel_jobs", "_selected_action": [queued.pk], "index": 0})
    queued.refresh_from_db()
    assert queued.state == JobState.CANCELLED


def test_a_queued_or_running_job_cannot_be_deleted(staff: Client, history: ProofJob) -> None:
    ProofJob.objects.filter(job_id="window-post-queued-7").update(state=JobState.RUNNING)
    running = ProofJob.objects.get(job_id="window-post-queued-7")
    assert staff.get(reverse("admin:engine_proofjob_delete", args=[running.pk])).status_code == 403
    assert staff.post(reverse("admin:engine_proofjob_delete", args=[running.pk]), {"post": "yes"}).status_code == 403
    assert ProofJob.objects.filter(pk=running.pk).exists()


def test_delete_selected_refuses_while_a_selected_job_is_active(staff: Client, history: ProofJob) -> None:
    queued = ProofJob.objects.get(job_id="window-post-queued-7")
    page = staff.post(reverse("admin:engine_proofjob_changelist"),
                      {"action": "delete_selected", "_selected_action": [history.pk, queued.pk], "post": "yes",
                       "index": 0}).content.decode()
    assert "is queued: cancel it before deleting it" in page
    assert ProofJob.objects.count() == 2


def test_a_finished_job_can_be_deleted(staff: Client, history: ProofJob) -> None:
    staff.post(reverse("admin:engine_proofjob_delete", args=[history.pk]), {"post": "yes"})
    assert not ProofJob.objects.filter(pk=history.pk).exists()


# ---- API tokens issued in the admin, the secret shown once ------------------------------------


def test_the_admin_index_names_api_tokens_as_operators_write_them(staff: Client) -> None:
    page = staff.get(reverse("admin:index")).content.decode()
    assert "API tokens" in page and "Api tokens" not in page


def add_token(staff: Client, **fields: str):
    return staff.post(reverse("admin:engine_apitoken_add"),
                      {"name": "curio-west", "scope": "client", "priority_cap": "", "active_cap": "", **fields})


def shown_token(page: str) -> str:
    import re

    found = re.search(r'id="issued-token"[^>]*value="(ps_[A-Za-z0-9_-]+)"', page)
    assert found, page[-2000:]
    return found.group(1)


def test_a_token_added_in_the_admin_is_shown_once_and_stored_hashed(staff: Client) -> None:
    from engine.ledger.tokens import hash_token
    from engine.models import ApiToken

    response = add_token(staff)
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    page = response.content.decode()
    token = shown_token(page)
    assert "not shown again" in page
    record = ApiToken.objects.get(name="curio-west")
    assert record.token_hash == hash_token(token) and record.prefix == token[:10]
    assert token not in str(response.cookies)  # not parked in a messages cookie
    later = staff.get(reverse("admin:engine_apitoken_change", args=[record.pk])).content.decode()
    assert token not in later
    assert Client(headers={"Authorization": f"Bearer {token}"}).get("/api/v1/jobs").status_code == 200


def test_an_operator_token_gets_the_operators_limits_unless_told(staff: Client) -> None:
    from engine.models import ApiToken
    from engine.states import Priority

    add_token(staff, name="dash", scope="operator")
    add_token(staff, name="capped", scope="client", priority_cap="1", active_cap="5")
    add_token(staff, name="uncapped", scope="client", active_cap="none")
    limits = dict((t.name, (t.max_priority, t.max_active_jobs)) for t in ApiToken.objects.all())
    assert limits["dash"] == (Priority.CRITICAL, None)
    assert limits["capped"] == (Priority.HIGH, 5)
    assert limits["uncapped"] == (Priority.NORMAL, None)


def test_a_token_name_in_use_is_refused_on_the_form(staff: Client) -> None:
    from engine.models import ApiToken

    add_token(staff)
    page = add_token(staff).content.decode()
    assert "already exists" in page and 'id="issued-token"' not in page
    assert ApiToken.objects.filter(name="curio-west").count() == 1


# ---- every write from the admin goes through the ledger -------------------------------------


def test_a_token_limit_changed_in_the_admin_list_is_kept(staff: Client) -> None:
    from engine.ledger.tokens import issue_token

    record, _ = issue_token("edited-in-list")
    staff.post(reverse("admin:engine_apitoken_changelist"),
               {"form-TOTAL_FORMS": "1", "form-INITIAL_FORMS": "1", "form-0-id": str(record.pk),
                "form-0-max_priority": "1", "form-0-max_active_jobs": "7", "_save": "Save"})
    record.refresh_from_db()
    assert (record.max_priority, record.max_active_jobs) == (1, 7)


def test_revoking_in_the_admin_revokes_only_live_tokens(staff: Client) -> None:
    from engine.ledger.tokens import issue_token, revoke_token

    live, _ = issue_token("live-one")
    gone, _ = issue_token("gone-one")
    revoked_at = revoke_token("gone-one").revoked_at
    page = staff.post(reverse("admin:engine_apitoken_changelist"),
                      {"action": "revoke", "_selected_action": [live.pk, gone.pk], "index": 0}, follow=True)
    assert "Revoked 1 token(s)." in page.content.decode()
    live.refresh_from_db()
    gone.refresh_from_db()
    assert live.revoked_at is not None and gone.revoked_at == revoked_at


def test_a_circuit_a_queued_job_proves_with_is_not_deleted_from_the_admin(staff: Client) -> None:
    from engine.models import Circuit

    circuit = Circuit.objects.create(id="cd" * 32, curve="bn128", n_public=1, n_vars=4, domain_size=8,
                                     zkey_path="/nowhere/circuit.zkey", zkey_bytes=1)
    ProofJob.objects.create(job_id="uses-the-circuit", kind=ProofKind.CUSTOM, circuit_id=circuit.job_circuit_id)
    page = staff.post(reverse("admin:engine_circuit_delete", args=[circuit.pk]), {"post": "yes"}, follow=True)
    assert "jobs still use this circuit: &#x27;uses-the-circuit&#x27;" in page.content.decode()
    assert Circuit.objects.filter(pk=circuit.pk).exists()
    ProofJob.objects.filter(job_id="uses-the-circuit").update(state=JobState.DONE)
    staff.post(reverse("admin:engine_circuit_delete", args=[circuit.pk]), {"post": "yes"})
    assert not Circuit.objects.filter(pk=circuit.pk).exists()


def test_a_running_host_is_not_deleted_from_the_admin_but_a_stopped_one_is(staff: Client, history: ProofJob) -> None:
    assert history.host_id is not None
    host = EngineHost.objects.get(pk=history.host_id)
    page = staff.post(reverse("admin:engine_enginehost_delete", args=[host.pk]), {"post": "yes"}).content.decode()
    assert "gpu-host-a has not stopped: stop its engine first" in page
    assert EngineHost.objects.filter(pk=host.pk).exists()
    EngineHost.objects.filter(pk=host.pk).update(stopped_at=timezone.now())
    staff.post(reverse("admin:engine_enginehost_delete", args=[host.pk]), {"post": "yes"})
    assert not EngineHost.objects.filter(pk=host.pk).exists()
    history.refresh_from_db()
    assert history.host_id is None  # the job's history stays, without its host


def test_an_operators_key_request_is_listed_read_only_and_found_by_state_host_and_circuit(staff: Client) -> None:
    from engine.ledger.key_requests import ask, finish
    from engine.models import KeyRequest

    EngineHost.objects.create(name="gpu-host-a")
    (evict,) = ask("porep-c2/tiny", "evict", "cold", "gpu-host-a", requested_by="console night-shift")
    (other,) = ask("snap-update/tiny", "evict", "warm", "gpu-host-a", requested_by="api ops")
    finish(other, KeyRequest.State.REFUSED, "in use by 2 claimed partitions")
    changelist = reverse("admin:engine_keyrequest_changelist")

    page = staff.get(changelist).content.decode()
    assert "porep-c2/tiny" in page and "console night-shift" in page and "gpu-host-a" in page
    assert "in use by 2 claimed partitions" in page
    pending = staff.get(changelist + "?state__exact=pending").content.decode()
    assert "porep-c2/tiny" in pending and "snap-update/tiny" not in pending
    found = staff.get(changelist + "?q=snap-update").content.decode()
    assert "snap-update/tiny" in found and "porep-c2/tiny" not in found
    by_host = staff.get(changelist + f"?host__id__exact={evict.host_id}&action__exact=evict").content.decode()
    assert "porep-c2/tiny" in by_host and "snap-update/tiny" in by_host

    # The engine and ask write these rows: the admin neither adds, changes nor deletes one.
    assert staff.get(reverse("admin:engine_keyrequest_add")).status_code == 403
    staff.post(reverse("admin:engine_keyrequest_change", args=[evict.pk]), {"state": "done"})
    assert KeyRequest.objects.get(pk=evict.pk).state == "pending"
    assert staff.post(reverse("admin:engine_keyrequest_delete", args=[evict.pk]), {"post": "yes"}).status_code == 403
    assert KeyRequest.objects.count() == 2

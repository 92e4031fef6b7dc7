"""A deadline is taken only within its window and kept in UTC; the database refuses a stored
moment its reader cannot read; and a row that holds one anyway (written before the database
refused them) breaks no read of the farm, and its job can still be cancelled."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from datetime import timezone as offset

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction
from django.test import Client
from django.utils import timezone

from engine.ledger.jobs import submit_job
from engine.models import ProofJob
from engine.moments import STORED_EARLIEST, STORED_LATEST, read_out_of_range
from engine.states import JobState
from tests.api.conftest import inputs

pytestmark = pytest.mark.django_db


def post(api: Client, job_id: str, deadline: str) -> tuple[int, dict]:
    response = api.post("/api/v1/jobs", {"kind": "porep-c2", "job_id": job_id, "inputs": inputs(),
                                         "deadline": deadline}, content_type="application/json")
    return response.status_code, response.json()


def test_a_deadline_its_offset_pushes_past_the_year_9999_is_refused_naming_it(api: Client) -> None:
    status, body = post(api, "year-10000", "9999-12-31T23:59:59-12:00")
    assert (status, body["field"]) == (400, "deadline"), body
    assert not ProofJob.objects.exists()


@pytest.mark.parametrize("deadline", [
    "0001-01-01T00:00:00+14:00",  # before the year 1 once in UTC
    "0001-01-02T00:00:00Z",  # the year 1: a deadline long past
    "2001-01-01T00:00:00Z",
    "9999-12-31T23:59:59Z",
])
def test_a_deadline_outside_its_window_is_refused_naming_the_window(api: Client, deadline: str) -> None:
    status, body = post(api, "out-of-window", deadline)
    assert (status, body["field"]) == (400, "deadline"), body
    assert "in the past" in body["detail"] or "years 1 to 9999" in body["detail"]


def test_the_window_is_a_few_minutes_in_the_past_to_a_year_ahead(api: Client) -> None:
    now = timezone.now()
    assert post(api, "just-past", f"{(now - timedelta(minutes=2)):%Y-%m-%dT%H:%M:%S}Z")[0] == 201
    assert post(api, "long-past", f"{(now - timedelta(minutes=10)):%Y-%m-%dT%H:%M:%S}Z")[0] == 400
    assert post(api, "in-a-year", f"{(now + timedelta(days=365)):%Y-%m-%dT%H:%M:%S}Z")[0] == 201
    assert post(api, "in-two-years", f"{(now + timedelta(days=400)):%Y-%m-%dT%H:%M:%S}Z")[0] == 400


def test_a_deadline_written_with_any_offset_is_kept_as_the_same_moment_in_utc(api: Client) -> None:
    local = (timezone.now() + timedelta(days=1)).astimezone(offset(timedelta(hours=14))).replace(microsecond=0)
    status, body = post(api, "plus-14", local.isoformat())
    assert status == 201, body
    stored = ProofJob.objects.get(job_id="plus-14").deadline
    assert stored == local and stored.utcoffset() == timedelta(0)
    assert body["deadline"].endswith(("Z", "+00:00"))


def test_the_database_refuses_a_deadline_or_latest_start_outside_what_its_reader_reads() -> None:
    job, _ = submit_job(kind="porep-c2", job_id="bounded", inputs={}, num_partitions=1)
    for column in ("deadline", "latest_start_at"):
        for moment in (STORED_LATEST + timedelta(days=1), STORED_EARLIEST - timedelta(days=1)):
            with pytest.raises(IntegrityError), transaction.atomic():
                ProofJob.objects.filter(pk=job.pk).update(**{column: moment})
        ProofJob.objects.filter(pk=job.pk).update(**{column: STORED_LATEST})  # the bounds themselves are readable


@pytest.mark.parametrize("text, read_as", [("10000-01-01 00:00:00+00", STORED_LATEST), ("infinity", STORED_LATEST),
                                            ("-infinity", STORED_EARLIEST), ("0044-03-15 12:00:00+00 BC", STORED_EARLIEST)])
def test_a_timestamp_python_cannot_read_is_read_as_the_nearest_stored_bound(text: str, read_as: datetime) -> None:
    assert read_out_of_range(text) == read_as


# ---- a row the reader cannot read: PostgreSQL stores the year 10000, Python cannot read it --------

postgresql_only = pytest.mark.skipif(connection.vendor != "postgresql",
                                     reason="only PostgreSQL stores a time Python cannot read (SQLite's are "
                                            "written by Python)")


def _unreadable(*jobs: ProofJob) -> None:
    """As rows written before the constraints: their deadline in the year 10000."""
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # the partitions' keys checked now: the table can change
        cursor.execute("ALTER TABLE engine_proofjob DROP CONSTRAINT deadline_readable")  # rolled back with the test
        cursor.execute("UPDATE engine_proofjob SET deadline = '10000-01-01 00:00:00+00' WHERE id = ANY(%s)",
                       [[job.pk for job in jobs]])


@postgresql_only
def test_a_row_holding_a_time_python_cannot_read_breaks_no_read_of_the_farm(api: Client, operator_api: Client,
                                                                           anonymous: Client) -> None:
    assert post(api, "from-before", f"{(timezone.now() + timedelta(hours=1)):%Y-%m-%dT%H:%M:%S}Z")[0] == 201
    _unreadable(ProofJob.objects.get(job_id="from-before"))
    listed = api.get("/api/v1/jobs")
    assert listed.status_code == 200 and listed.json()["items"][0]["deadline"].startswith("9000-01-01")
    assert api.get("/api/v1/jobs/from-before").status_code == 200
    assert operator_api.get("/api/v1/capacity").status_code == 200
    assert operator_api.get("/status").status_code == 200
    assert anonymous.get("/metrics").status_code == 200
    staff = Client()
    staff.force_login(get_user_model().objects.create_superuser("ops", "", "pw-for-tests-only"))
    for page in ("/", "/jobs/", "/jobs/from-before", "/admin/engine/proofjob/"):
        assert staff.get(page).status_code == 200, page


@postgresql_only
def test_a_job_holding_a_time_python_cannot_read_can_be_cancelled_by_the_api_and_by_canceljob(api: Client) -> None:
    soon = f"{(timezone.now() + timedelta(hours=1)):%Y-%m-%dT%H:%M:%S}Z"
    assert post(api, "by-api", soon)[0] == 201 and post(api, "by-command", soon)[0] == 201
    _unreadable(ProofJob.objects.get(job_id="by-api"), ProofJob.objects.get(job_id="by-command"))
    assert api.post("/api/v1/jobs/by-api/cancel").json()["state"] == JobState.CANCELLED
    call_command("canceljob", "by-command")
    assert set(ProofJob.objects.values_list("state", flat=True)) == {JobState.CANCELLED}


@postgresql_only
def test_the_migration_clamps_a_stored_time_python_cannot_read_to_the_bounds() -> None:
    import importlib

    from django.apps import apps

    job, _ = submit_job(kind="porep-c2", job_id="clamped", inputs={}, num_partitions=1)
    endless, _ = submit_job(kind="porep-c2", job_id="endless", inputs={}, num_partitions=1)
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute("ALTER TABLE engine_proofjob DROP CONSTRAINT deadline_readable")
        cursor.execute("ALTER TABLE engine_proofjob DROP CONSTRAINT latest_start_readable")
        cursor.execute("UPDATE engine_proofjob SET deadline = '10000-01-01 00:00:00+00', "
                       "latest_start_at = '0001-01-01 00:00:00+00 BC' WHERE id = %s", [job.pk])
        cursor.execute("UPDATE engine_proofjob SET deadline = 'infinity', latest_start_at = '-infinity' "
                       "WHERE id = %s", [endless.pk])
    migration = importlib.import_module("engine.migrations.0021_deadline_bounds")
    with connection.schema_editor() as editor:
        migration.clamp_unreadable(apps, editor)
    with connection.cursor() as cursor:
        cursor.execute("SELECT deadline::text, latest_start_at::text FROM engine_proofjob WHERE id IN (%s, %s)",
                       [job.pk, endless.pk])
        assert cursor.fetchall() == [("9000-01-01 00:00:00+00", "1970-01-01 00:00:00+00")] * 2
    for row in (job, endless):
        row.refresh_from_db()
        assert (row.deadline, row.latest_start_at) == (datetime(9000, 1, 1, tzinfo=UTC),
                                                       datetime(1970, 1, 1, tzinfo=UTC))

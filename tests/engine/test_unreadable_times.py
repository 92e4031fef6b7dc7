"""A job row holding a time Python cannot read (PostgreSQL kept a deadline in the year 10000
before the database refused them) stops no engine: claims read it as the latest stored moment
and go on, its own partitions included, and the other jobs are claimed in their order."""

from __future__ import annotations

import pytest
from django.db import connection

from engine.models import Partition
from engine.moments import STORED_LATEST

pytestmark = [pytest.mark.django_db,
              pytest.mark.skipif(connection.vendor != "postgresql",
                                 reason="only PostgreSQL stores a time Python cannot read")]


def test_engines_claim_around_and_through_a_job_whose_deadline_python_cannot_read(make_writer, make_job) -> None:
    stuck = make_job("porep-c2", partitions=1, job_id="year-10000")
    later = make_job("porep-c2", partitions=1, job_id="after-it")
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute("ALTER TABLE engine_proofjob DROP CONSTRAINT deadline_readable")  # rolled back with the test
        cursor.execute("ALTER TABLE engine_proofjob DROP CONSTRAINT latest_start_readable")
        cursor.execute("UPDATE engine_proofjob SET deadline = '10000-01-01 00:00:00+00', "
                       "latest_start_at = '10000-01-01 00:00:00+00' WHERE id = %s", [stuck.pk])
    writer = make_writer("host-a")
    claims = writer.claim(2)
    claimed = {Partition.objects.select_related("job").get(pk=c.partition_id).job.job_id for c in claims}
    assert claimed == {"year-10000", "after-it"}
    stuck.refresh_from_db()
    later.refresh_from_db()
    assert stuck.deadline == STORED_LATEST and later.deadline is None

"""SQLite's write-ahead log is copied into the database by the engine's heartbeat, so no
partition's transition pays a checkpoint's fsync inside its commit."""

from __future__ import annotations

import pytest
from django.db import connection

from engine.circuits.kinds import validate_inputs
from engine.ledger.demo import demo_inputs
from engine.ledger.jobs import submit_job
from engine.pipeline.host import checkpoint_wal

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_heartbeat_s_checkpoint_copies_every_frame_of_the_log_into_the_database() -> None:
    if connection.vendor != "sqlite":
        assert checkpoint_wal() is None  # PostgreSQL keeps its own log
        return
    inputs, n = validate_inputs("winning-post", demo_inputs("winning-post"))
    for i in range(5):  # rows written, so the log holds frames
        submit_job(kind="winning-post", job_id=f"wal-{i}", inputs=inputs, num_partitions=n)
    answer = checkpoint_wal()
    assert answer is not None
    busy, frames, copied = answer
    assert busy == 0 and frames > 0 and copied == frames

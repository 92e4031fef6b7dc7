"""Every endpoint that takes files gets the upload limit at header time, not the few KiB of a
JSON body: a circuit's registration and a registered circuit's witness job as well as a
custom job (a real zkey is far over 16 KiB)."""

from __future__ import annotations

import pytest

from provingsite.bodylimit import body_limit, is_upload, judge

TOKEN = "Bearer ps_anything"
CIRCUIT = "ab" * 32


@pytest.fixture
def limits(settings):
    settings.PROVINGSITE = {**settings.PROVINGSITE, "UPLOAD_LIMIT": "64MiB", "BODY_LIMIT": "16KiB"}
    return settings


@pytest.mark.parametrize("path", ["/api/v1/circuits", f"/api/v1/circuits/{CIRCUIT}/jobs"])
def test_a_circuit_upload_takes_the_upload_limit(limits, path: str) -> None:
    assert body_limit("POST", path) == 64 * 2**20
    assert judge("POST", path, 100_665, TOKEN, None) is None  # the fixture zkey's size


@pytest.mark.parametrize("path", [f"/api/v1/circuits/{CIRCUIT}", f"/api/v1/circuits/{CIRCUIT}/jobs/x", "/api/v1/jobs"])
def test_other_circuit_and_job_paths_keep_the_small_limit(limits, path: str) -> None:
    assert not is_upload(path)
    assert body_limit("POST", path) == 16 * 2**10

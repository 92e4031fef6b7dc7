"""POST /jobs/custom: a snarkjs zkey + wtns upload, streamed to disk and limited in size."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from engine.models import ProofJob
from engine.states import Curve

pytestmark = pytest.mark.django_db


FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "snarkjs"
FOLDER: dict[str, str] = {Curve.BN254: "bn128", Curve.BLS12_381: "bls12381"}


def zkey_bytes(curve: str, padding: int = 0) -> bytes:
    """A real snarkjs Groth16 zkey over ``curve`` (uploads are validated in full), padded."""
    return (FIXTURES / FOLDER[curve] / "circuit.zkey").read_bytes() + b"\0" * padding


def wtns_bytes(curve: str) -> bytes:
    return (FIXTURES / FOLDER[curve] / "witness.wtns").read_bytes()


def upload(api: Client, job_id: str = "mine-1", curve: str = Curve.BN254, **files: bytes):
    body: dict[str, object] = {
        "job_id": job_id,
        "zkey": SimpleUploadedFile("c.zkey", files.get("zkey", zkey_bytes(curve))),
        "wtns": SimpleUploadedFile("c.wtns", files.get("wtns", wtns_bytes(curve))),
    }
    return api.post("/api/v1/jobs/custom", body)


@pytest.mark.parametrize("curve", [Curve.BN254, Curve.BLS12_381])
def test_an_upload_becomes_a_custom_job_over_the_curve_of_its_zkey(api: Client, uploads: Path, curve: str) -> None:
    response = upload(api, curve=curve)
    assert response.status_code == 201, response.content
    job = ProofJob.objects.get(job_id="mine-1")
    assert (job.kind, job.curve, job.num_partitions) == ("custom", curve, 1)
    assert Path(job.upload_dir) == uploads / "uploads" / str(job.pk)
    assert (Path(job.upload_dir) / "circuit.zkey").read_bytes() == zkey_bytes(curve)
    assert (Path(job.upload_dir) / "witness.wtns").read_bytes() == wtns_bytes(curve)


def test_the_same_files_again_return_the_existing_job(api: Client, uploads: Path) -> None:
    upload(api)
    again = upload(api)
    assert again.status_code == 200
    assert ProofJob.objects.count() == 1
    assert [p.name for p in (uploads / "uploads").iterdir()] == [str(ProofJob.objects.get().pk)]


def test_other_files_under_a_used_id_are_a_409(api: Client, uploads: Path) -> None:
    upload(api)
    response = upload(api, wtns=wtns_bytes(Curve.BN254)[:-1] + b"\2")
    assert response.status_code == 409 and response.json()["field"] == "job_id"


def test_an_upload_over_the_limit_is_refused_with_413_before_it_is_stored(
        api: Client, uploads: Path, settings) -> None:
    settings.PROVINGSITE = {**settings.PROVINGSITE, "UPLOAD_LIMIT": "4KiB"}
    response = upload(api, zkey=zkey_bytes(Curve.BN254, padding=8192))
    assert response.status_code == 413 and response.json()["error"] == "too_large"
    assert not ProofJob.objects.exists()
    assert list((uploads / "uploads").iterdir()) == [] if (uploads / "uploads").exists() else True


def test_the_running_count_stops_a_stream_that_declared_no_length(tmp_path: Path) -> None:
    # A chunked upload has no Content-Length; the handler must stop at the limit by itself.
    from engine.api.uploads import StreamingLimitHandler, UploadTooLarge

    handler = StreamingLimitHandler(tmp_path / "staging", limit=100)
    handler.handle_raw_input(None, {}, 0, b"b")
    handler.new_file("zkey", "c.zkey", "application/octet-stream", None)
    handler.receive_data_chunk(b"x" * 60, 0)
    with pytest.raises(UploadTooLarge):
        handler.receive_data_chunk(b"x" * 60, 60)
    assert (tmp_path / "staging" / "circuit.zkey").stat().st_size == 60


def test_a_file_that_is_not_a_zkey_is_refused_naming_zkey(api: Client, uploads: Path) -> None:
    response = upload(api, zkey=b"PK\x03\x04 certainly a zip")
    assert response.status_code == 400 and response.json()["field"] == "zkey"


def test_a_witness_over_another_curve_is_refused_naming_wtns(api: Client, uploads: Path) -> None:
    response = upload(api, curve=Curve.BN254, wtns=wtns_bytes(Curve.BLS12_381))
    assert response.status_code == 400 and response.json()["field"] == "wtns"


def test_a_missing_file_is_refused_naming_it(api: Client, uploads: Path) -> None:
    response = api.post("/api/v1/jobs/custom", {"job_id": "x", "zkey": SimpleUploadedFile("c.zkey", b"zkey")})
    assert response.status_code == 400 and response.json()["field"] in ("zkey", "wtns")


def test_a_bad_job_id_is_refused_naming_job_id(api: Client, uploads: Path) -> None:
    assert upload(api, job_id="no spaces").json()["field"] == "job_id"


def test_a_json_body_is_refused_naming_the_body(api: Client, uploads: Path) -> None:
    response = api.post("/api/v1/jobs/custom", {"job_id": "x"}, content_type="application/json")
    assert response.status_code == 400 and response.json()["field"] == "body"


def test_an_upload_without_a_token_is_refused_before_it_is_read(anonymous: Client, uploads: Path) -> None:
    response = upload(anonymous)
    assert response.status_code == 401
    assert not (uploads / "uploads").exists()


@pytest.mark.parametrize("folder, curve", [("bn128", Curve.BN254), ("bls12381", Curve.BLS12_381)])
def test_real_snarkjs_files_are_recognised(api: Client, uploads: Path, folder: str, curve: str) -> None:
    here = Path(__file__).resolve().parent.parent / "fixtures" / "snarkjs" / folder
    response = upload(api, job_id=f"chain-{folder}", zkey=(here / "circuit.zkey").read_bytes(),
                      wtns=(here / "witness.wtns").read_bytes())
    assert response.status_code == 201, response.content
    assert response.json()["curve"] == curve

"""POST /jobs/custom validates both files in full before a job exists: each malformed file
is a 400 naming the file and the reason, never a 201 that fails later or a 500, and no
reply shows a server path."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from engine.models import ProofJob

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "snarkjs"
BN_R = 21888242871839275222246405745257275088548364400416034343698204186575808495617
BN_Q = 21888242871839275222246405745257275088696311157297823662689037894645226208583


def fixture(name: str, folder: str = "bn128") -> bytes:
    return (FIXTURES / folder / name).read_bytes()


def table(data: bytes) -> list[tuple[int, int, int]]:
    """[(section id, header offset, size)] of a binfile, in file order."""
    (count,) = struct.unpack_from("<I", data, 8)
    pos, rows = 12, []
    for _ in range(count):
        sid, size = struct.unpack_from("<IQ", data, pos)
        rows.append((sid, pos, size))
        pos += 12 + size
    return rows


def payload(data: bytes, sid: int) -> int:
    """Where section ``sid``'s payload starts."""
    return next(pos + 12 for s, pos, _ in table(data) if s == sid)


def patched(data: bytes, at: int, raw: bytes) -> bytes:
    return data[:at] + raw + data[at + len(raw):]


def header_field(data: bytes, index: int, value: int) -> bytes:
    """The zkey with field ``index`` of nVars, nPublic, domainSize (0, 1, 2) replaced (BN254)."""
    return patched(data, payload(data, 2) + 4 + 32 + 4 + 32 + 4 * index, struct.pack("<I", value))


def without_section(data: bytes, sid: int) -> bytes:
    rows = table(data)
    kept = b"".join(data[pos:pos + 12 + size] for s, pos, size in rows if s != sid)
    return data[:8] + struct.pack("<I", len(rows) - 1) + kept


def first_section_size(data: bytes, size: int) -> bytes:
    return patched(data, 12 + 4, struct.pack("<Q", size))


ZKEY = fixture("circuit.zkey")
WTNS = fixture("witness.wtns")
COEF = payload(ZKEY, 4) + 4  # the first coefficient entry: matrix, constraint, signal, value
WVALUES = payload(WTNS, 2)

BAD_ZKEYS: dict[str, Callable[[], bytes]] = {
    "truncated in the middle": lambda: ZKEY[: len(ZKEY) // 2],
    "truncated in the section table": lambda: ZKEY[:20],
    "a first section of 2^63 bytes": lambda: first_section_size(ZKEY, 1 << 63),
    "a first section of 2^64 - 1 bytes": lambda: first_section_size(ZKEY, (1 << 64) - 1),
    "4 billion sections": lambda: patched(ZKEY, 8, struct.pack("<I", 0xFFFFFFFF)),
    "a 2^27 domain in a 100 KB file": lambda: header_field(ZKEY, 2, 1 << 27),
    "a 2^28 domain in a 100 KB file": lambda: header_field(ZKEY, 2, 1 << 28),
    "a domain that is not a power of two": lambda: header_field(ZKEY, 2, 255),
    "nVars that the sections do not hold": lambda: header_field(ZKEY, 0, 2_000_000),
    "more public signals than signals": lambda: header_field(ZKEY, 1, 204),
    "n8r of 48": lambda: patched(ZKEY, payload(ZKEY, 2) + 4 + 32, struct.pack("<I", 48)),
    "protocol 2 (PLONK)": lambda: patched(ZKEY, payload(ZKEY, 1), struct.pack("<I", 2)),
    "no H section": lambda: without_section(ZKEY, 9),
    "a coefficient of matrix 2": lambda: patched(ZKEY, COEF, struct.pack("<I", 2)),
    "a coefficient on signal 2^31": lambda: patched(ZKEY, COEF + 8, struct.pack("<I", 1 << 31)),
    "a coefficient not below r": lambda: patched(ZKEY, COEF + 12, b"\xff" * 32),
    "an H point coordinate not below q": lambda: patched(ZKEY, payload(ZKEY, 9), b"\xff" * 32),
}

BAD_WITNESSES: dict[str, Callable[[], bytes]] = {
    "truncated": lambda: WTNS[:-100],
    "a values section of 2^63 bytes": lambda: patched(WTNS, payload(WTNS, 2) - 8, struct.pack("<Q", 1 << 63)),
    "48-byte values": lambda: patched(WTNS, payload(WTNS, 1), struct.pack("<I", 48)),
    "fewer values than the circuit's signals": lambda: _short_witness(),
    "witness[0] = 2": lambda: patched(WTNS, WVALUES, (2).to_bytes(32, "little")),
    "a value not below r": lambda: patched(WTNS, WVALUES + 32, BN_R.to_bytes(32, "little")),
    "the base field's prime": lambda: patched(WTNS, payload(WTNS, 1) + 4, BN_Q.to_bytes(32, "little")),
}


def _short_witness() -> bytes:
    """A well-formed witness of 203 values for the 204-signal circuit."""
    head = struct.pack("<I", 32) + BN_R.to_bytes(32, "little") + struct.pack("<I", 203)
    values = WTNS[WVALUES:WVALUES + 203 * 32]
    return (b"wtns" + struct.pack("<II", 2, 2) + struct.pack("<IQ", 1, len(head)) + head
            + struct.pack("<IQ", 2, len(values)) + values)


def upload(api: Client, zkey: bytes = ZKEY, wtns: bytes = WTNS):
    return api.post("/api/v1/jobs/custom", {"job_id": "mine-1",
                                            "zkey": SimpleUploadedFile("c.zkey", zkey),
                                            "wtns": SimpleUploadedFile("c.wtns", wtns)})


def assert_refused(response, field: str, uploads: Path) -> None:
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["field"] == field, body
    assert body["detail"], body
    assert str(uploads) not in response.content.decode()
    assert ".incoming-" not in response.content.decode()
    assert not ProofJob.objects.exists()


@pytest.mark.parametrize("case", list(BAD_ZKEYS))
def test_a_malformed_zkey_is_refused_at_upload_naming_zkey(api: Client, uploads: Path, case: str) -> None:
    assert_refused(upload(api, zkey=BAD_ZKEYS[case]()), "zkey", uploads)


@pytest.mark.parametrize("case", list(BAD_WITNESSES))
def test_a_malformed_witness_is_refused_at_upload_naming_wtns(api: Client, uploads: Path, case: str) -> None:
    assert_refused(upload(api, wtns=BAD_WITNESSES[case]()), "wtns", uploads)


def test_the_refusal_of_a_huge_domain_says_which_section_disagrees(api: Client, uploads: Path) -> None:
    detail = upload(api, zkey=BAD_ZKEYS["a 2^27 domain in a 100 KB file"]()).json()["detail"]
    assert "section 9" in detail and "134217728" in detail


def test_a_refused_upload_leaves_no_files_behind(api: Client, uploads: Path) -> None:
    upload(api, zkey=BAD_ZKEYS["a first section of 2^63 bytes"]())
    assert not (uploads / "uploads").exists() or list((uploads / "uploads").iterdir()) == []


@pytest.mark.parametrize("folder", ["bn128", "bls12381"])
def test_real_snarkjs_files_pass_validation(api: Client, uploads: Path, folder: str) -> None:
    response = upload(api, zkey=fixture("circuit.zkey", folder), wtns=fixture("witness.wtns", folder))
    assert response.status_code == 201, response.content


def test_a_key_made_by_our_own_setup_passes_validation(api: Client, uploads: Path, tmp_path: Path) -> None:
    from engine.prover import write_wtns, write_zkey
    from engine.prover.setup import setup, synthetic_circuit

    r1cs, witness = synthetic_circuit("bn128", 200, n_public=2, seed=7)
    pk, _ = setup(r1cs, seed=1)
    write_zkey(tmp_path / "c.zkey", pk)
    write_wtns(tmp_path / "c.wtns", "bn128", witness)
    response = upload(api, zkey=(tmp_path / "c.zkey").read_bytes(), wtns=(tmp_path / "c.wtns").read_bytes())
    assert response.status_code == 201, response.content

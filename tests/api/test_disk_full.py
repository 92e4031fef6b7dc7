"""A full data directory: a registration or an upload that no longer fits is a 507 naming the
directory, its files are closed and removed (an open descriptor would keep a deleted file's
blocks), and the writers that stage a file under a temporary name leave none behind.

The disk is real: a tmpfs of a few hundred KiB mounted as the data directory (mounting needs
root; elsewhere these tests skip)."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from engine.models import Circuit, ProofJob
from tests.api.test_custom import wtns_bytes, zkey_bytes

pytestmark = pytest.mark.django_db

DISK = 256 << 10


@pytest.fixture
def small_disk(tmp_path: Path, settings: Any) -> Iterator[Path]:
    """A 256 KiB filesystem as the data directory."""
    mount = tmp_path / "data"
    mount.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command here")
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK}", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {made.stderr.strip()}")
    settings.DATA_DIR = mount
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def files_in(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if not p.is_dir())


def descriptors_into(folder: Path) -> list[str]:
    """This process's open files inside ``folder`` (a deleted one still holds its blocks)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(f"{folder}/"):
            found.append(target)
    return found


def used(folder: Path) -> int:
    stat = os.statvfs(folder)
    return (stat.f_blocks - stat.f_bfree) * stat.f_frsize


def fill(folder: Path, leave: int) -> Path:
    """A file taking all the disk's room but ``leave`` bytes."""
    stat = os.statvfs(folder)
    filler = folder / "filler"
    filler.write_bytes(b"\0" * max(0, stat.f_bavail * stat.f_frsize - leave))
    return filler


def insufficient_storage(response: Any, folder: Path, field: str | None) -> bool:
    said = response.json()
    return (response.status_code == 507 and said["error"] == "insufficient_storage" and said["field"] == field
            and f"the data directory {folder}" in said["detail"])


def test_a_registration_larger_than_the_room_left_is_a_507_naming_the_directory(api: Client,
                                                                                 small_disk: Path) -> None:
    zkey = zkey_bytes("bn128", padding=2 * DISK)  # a real key, padded past the disk
    response = api.post("/api/v1/circuits", {"zkey": SimpleUploadedFile("big.zkey", zkey)})
    assert insufficient_storage(response, small_disk, "zkey"), response.content
    assert files_in(small_disk) == [] and descriptors_into(small_disk) == []
    assert used(small_disk) == 0 and not Circuit.objects.exists()
    again = api.post("/api/v1/circuits", {"zkey": SimpleUploadedFile("c.zkey", zkey_bytes("bn128"))})
    assert again.status_code == 201, again.content  # the disk is as free as before the refusal


def test_an_upload_larger_than_the_room_left_is_a_507_and_leaves_nothing_behind(api: Client,
                                                                                small_disk: Path) -> None:
    filler = fill(small_disk, leave=120 << 10)  # the zkey fits, the witness does not
    response = api.post("/api/v1/jobs/custom", {
        "job_id": "no-room", "zkey": SimpleUploadedFile("c.zkey", zkey_bytes("bn128")),
        "wtns": SimpleUploadedFile("c.wtns", wtns_bytes("bn128") * 8)})
    assert insufficient_storage(response, small_disk, "wtns"), response.content
    assert files_in(small_disk) == ["filler"] and descriptors_into(small_disk) == []
    assert not ProofJob.objects.exists()
    filler.unlink()
    assert used(small_disk) == 0


def test_a_job_from_a_registered_circuit_s_inputs_on_a_full_disk_is_a_507(api: Client, small_disk: Path) -> None:
    from engine.api.submit_circuit import SIGNALS_FILE
    from engine.ledger.circuits import circuits_dir

    folder = circuits_dir() / ("ab" * 32)
    folder.mkdir(parents=True)
    (folder / "circuit.zkey").write_bytes(b"k")
    (folder / "circuit.wasm").write_bytes(b"w")
    (folder / SIGNALS_FILE).write_text('{"count": 1, "signals": null}')
    Circuit.objects.create(id="ab" * 32, name="c", curve="bn128", n_public=1, n_vars=4, domain_size=8,
                           zkey_path=str(folder / "circuit.zkey"), zkey_bytes=1, wasm_path=str(folder / "circuit.wasm"),
                           wasm_bytes=1, owner=None)
    from engine.ledger.tokens import issue_token

    operator = Client(headers={"Authorization": f"Bearer {issue_token('ops', scope='operator')[1]}"})
    fill(small_disk, leave=0)
    big_inputs = {"a": ["1" * 70] * 1}
    response = operator.post("/api/v1/jobs", {"circuit": "ab" * 32, "job_id": "full", "inputs": big_inputs},
                             content_type="application/json")
    assert response.status_code == 507 and f"the data directory {small_disk}" in response.json()["detail"]
    assert not ProofJob.objects.exists()
    assert [f for f in files_in(small_disk) if "incoming" in f] == []


@dataclasses.dataclass(frozen=True)
class Points:
    """A key's five point arrays (what keymap images), 64 KiB each."""

    a_points: np.ndarray = dataclasses.field(default_factory=lambda: np.ones(8192, dtype=np.uint64))
    b1_points: np.ndarray = dataclasses.field(default_factory=lambda: np.ones(8192, dtype=np.uint64))
    b2_points: np.ndarray = dataclasses.field(default_factory=lambda: np.ones(8192, dtype=np.uint64))
    c_points: np.ndarray = dataclasses.field(default_factory=lambda: np.ones(8192, dtype=np.uint64))
    h_points: np.ndarray = dataclasses.field(default_factory=lambda: np.ones(8192, dtype=np.uint64))


def test_a_key_image_that_does_not_fit_leaves_no_partial_file(small_disk: Path) -> None:
    from engine.pipeline.keymap import map_key

    fill(small_disk, leave=100 << 10)  # room for one array and a half
    with pytest.raises(OSError):
        map_key(Points(), small_disk / "images", "winning-post/tiny")
    left = files_in(small_disk / "images")
    assert [f for f in left if not f.endswith(".npy")] == []  # no temporary file: whole arrays only
    assert len(left) == 1 and descriptors_into(small_disk) == []


def test_a_compiled_circuit_that_does_not_fit_its_cache_leaves_no_temporary_file(small_disk: Path) -> None:
    from engine.circuits import compiled
    from engine.circuits.kinds import circuit_for

    shape = circuit_for("winning-post", "tiny")
    r1cs = compiled.compile_shape(shape)
    fill(small_disk, leave=4 << 10)
    compiled.use_disk_cache(small_disk)
    try:
        compiled.store_cached(shape, r1cs)  # a cache it cannot write only costs the recompile
    finally:
        from django.conf import settings

        compiled.use_disk_cache(settings.PROVINGSITE["CACHE_DIR"])
    assert files_in(small_disk) == ["filler"] and descriptors_into(small_disk) == []

"""The key of a kernel build (native_build.source_hash) follows the sources: an edit to a kernel
or to the Python that generates its prelude makes a new key, so a stale build is never
loaded; the key is remembered by the files' sizes and times, so a start reads no source."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.prover import config
from engine.prover.backends.cpu import native_build


@pytest.fixture
def sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A copy of the prover's kernel sources and generators, and an empty cache, in use."""
    root = tmp_path / "prover"
    shutil.copytree(native_build.KERNEL_DIR, root / "backends" / "kernels")
    for name in native_build.GENERATOR_FILES:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(native_build.PROVER_DIR / name, root / name)
    monkeypatch.setattr(native_build, "PROVER_DIR", root)
    monkeypatch.setattr(native_build, "KERNEL_DIR", root / "backends" / "kernels")
    config.configure(config.ProverConfig(cache_dir=tmp_path / "cache"))
    yield root
    config.configure(None)


def all_sources() -> list[Path]:
    return [*(native_build.KERNEL_DIR / n for n in native_build.KERNEL_FILES),
            *(native_build.PROVER_DIR / n for n in native_build.GENERATOR_FILES)]


def test_the_key_is_the_digest_of_the_sources(sources: Path) -> None:
    assert native_build.source_hash("generic") == native_build._digest(all_sources(), "generic")
    assert native_build.source_hash("generic") != native_build.source_hash("bmi2-adx")


@pytest.mark.parametrize("name", ["backends/kernels/field.h", "backends/kernels/groth16.h", "params/curves.py",
                                  "backends/cpu/native_build.py"])
def test_an_edit_to_any_source_makes_a_new_key(sources: Path, name: str) -> None:
    before = native_build.source_hash("generic")
    with open(sources / name, "a") as f:
        f.write("\n/* an edit */\n" if name.endswith(".h") else "\n# an edit\n")
    assert native_build.source_hash("generic") != before
    assert native_build.source_hash("generic") == native_build._digest(all_sources(), "generic")


def test_an_edit_that_keeps_the_size_is_seen_by_its_time(sources: Path) -> None:
    before = native_build.source_hash("generic")
    path = sources / "backends" / "kernels" / "port.h"
    text = path.read_bytes()
    stat = path.stat()
    path.write_bytes(text.replace(b"Portability", b"portability", 1))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert native_build.source_hash("generic") != before


def test_a_start_with_unchanged_sources_reads_none_of_them(sources: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = native_build.source_hash("generic")

    def no_reading(paths: list[Path], isa: str) -> str:
        raise AssertionError("the sources were read and hashed again")

    monkeypatch.setattr(native_build, "_digest", no_reading)
    assert native_build.source_hash("generic") == key


def test_a_cache_that_cannot_be_written_still_gives_the_key(sources: Path, tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    config.configure(config.ProverConfig(cache_dir=tmp_path / "a-file"))
    assert native_build.source_hash("generic") == native_build._digest(all_sources(), "generic")

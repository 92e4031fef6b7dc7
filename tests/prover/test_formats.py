"""engine.prover.formats: every reader refuses a malformed file with a FormatError naming the
file's field (what the API answers a 400 with), and no size a header declares makes one
allocate more than the file itself justifies."""

from __future__ import annotations

import pickle
import struct
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.prover.formats.circom import check_sym, check_wasm
from engine.prover.formats.errors import FormatError
from engine.prover.formats.headers import ZkeyHeader, inspect_zkey
from engine.prover.formats.r1cs import CircuitShape, check_structure, read_r1cs
from engine.prover.formats.wtns import read_wtns, validate_wtns
from engine.prover.formats.zkey import check_zkey, validate_zkey
from engine.prover.snarkjs import read_zkey
from tests.prover.test_snarkjs_bounds import sections

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "snarkjs" / "bn128"
MiB = 1 << 20


def key_header() -> ZkeyHeader:
    return inspect_zkey(FIXTURES / "circuit.zkey")[0]


def validated_zkey(path: Path) -> object:
    with open(path, "rb") as fh:
        return validate_zkey(fh, path.stat().st_size)


def validated_wtns(path: Path) -> object:
    with open(path, "rb") as fh:
        return validate_wtns(fh, path.stat().st_size, key_header())


def structure(path: Path) -> None:
    header = key_header()
    check_structure(path, CircuitShape(header.curve, header.n_vars, header.n_public))


# (field, fixture, reader): every reader of a binfile format, the whole-file and the streamed ones
READERS: dict[str, tuple[str, str, Callable[[Path], object]]] = {
    "read_zkey": ("zkey", "circuit.zkey", read_zkey),
    "validate_zkey": ("zkey", "circuit.zkey", validated_zkey),
    "check_zkey": ("zkey", "circuit.zkey", check_zkey),
    "read_wtns": ("wtns", "witness.wtns", read_wtns),
    "validate_wtns": ("wtns", "witness.wtns", validated_wtns),
    "read_r1cs": ("r1cs", "circuit.r1cs", read_r1cs),
    "check_structure": ("r1cs", "circuit.r1cs", structure),
}


def patched(data: bytes, at: int, raw: bytes) -> bytes:
    return data[:at] + raw + data[at + len(raw):]


def refused(reader: str, data: bytes, tmp_path: Path) -> FormatError:
    field, name, read = READERS[reader]
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(FormatError) as caught:
        read(path)
    assert caught.value.field == field, caught.value
    assert str(caught.value) == caught.value.message
    return caught.value


def fixture(reader: str) -> bytes:
    return (FIXTURES / READERS[reader][1]).read_bytes()


@pytest.mark.parametrize("reader", list(READERS))
def test_the_fixtures_read(reader: str) -> None:
    _, name, read = READERS[reader]
    read(FIXTURES / name)


@pytest.mark.parametrize("reader", list(READERS))
def test_a_file_cut_in_half_is_refused_naming_its_field(reader: str, tmp_path: Path) -> None:
    data = fixture(reader)
    refused(reader, data[: len(data) // 2], tmp_path)


@pytest.mark.parametrize("reader", list(READERS))
def test_a_file_cut_inside_its_section_table_is_refused_naming_its_field(reader: str, tmp_path: Path) -> None:
    refused(reader, fixture(reader)[:20], tmp_path)


@pytest.mark.parametrize("reader", list(READERS))
def test_a_header_declaring_4_billion_sections_is_refused_naming_its_field(reader: str, tmp_path: Path) -> None:
    assert "sections" in refused(reader, patched(fixture(reader), 8, struct.pack("<I", 0xFFFFFFFF)), tmp_path).message


@pytest.mark.parametrize("reader", list(READERS))
def test_a_section_declaring_more_bytes_than_the_file_holds_is_refused_naming_its_field(
        reader: str, tmp_path: Path) -> None:
    data = fixture(reader)
    error = refused(reader, patched(data, 12 + 4, struct.pack("<Q", 1 << 63)), tmp_path)
    assert str(1 << 63) in error.message


def r1cs_constraints(data: bytes, count: int) -> bytes:
    offset, _ = sections(data)[1]
    return patched(data, offset + 4 + 32 + 4 * 4 + 8, struct.pack("<I", count))


def wtns_count(data: bytes, count: int) -> bytes:
    offset, _ = sections(data)[1]
    return patched(data, offset + 4 + 32, struct.pack("<I", count))


def zkey_domain(data: bytes, domain: int) -> bytes:
    offset, _ = sections(data)[2]
    return patched(data, offset + 4 + 32 + 4 + 32 + 8, struct.pack("<I", domain))


HUGE: dict[str, tuple[str, Callable[[bytes], bytes]]] = {
    "read_r1cs": ("read_r1cs", lambda d: r1cs_constraints(d, 0xFFFFFFFF)),
    "check_structure": ("check_structure", lambda d: r1cs_constraints(d, 0xFFFFFFFF)),
    "read_wtns": ("read_wtns", lambda d: wtns_count(d, 0xFFFFFFFF)),
    "validate_wtns": ("validate_wtns", lambda d: wtns_count(d, 0xFFFFFFFF)),
    "read_zkey": ("read_zkey", lambda d: zkey_domain(d, 1 << 27)),
    "validate_zkey": ("validate_zkey", lambda d: zkey_domain(d, 1 << 27)),
}


@pytest.mark.parametrize("case", list(HUGE))
def test_a_huge_declared_count_is_refused_before_anything_of_its_size_is_allocated(
        case: str, tmp_path: Path) -> None:
    """4 billion constraints or values, or a 2^27 domain, in a file of tens of KB: a FormatError
    (not a MemoryError, nor an array sized from the header), with no more memory taken than a
    small multiple of the file."""
    reader, corrupt = HUGE[case]
    data = corrupt(fixture(reader))
    tracemalloc.start()
    try:
        refused(reader, data, tmp_path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * len(data) + MiB, peak


def test_a_wasm_that_is_not_a_witness_generator_is_refused_naming_wasm(tmp_path: Path) -> None:
    (tmp_path / "c.wasm").write_bytes(b"\0asm\x01\0\0\0\x01")  # a module cut after its first byte
    with pytest.raises(FormatError) as caught:
        check_wasm(tmp_path / "c.wasm", key_header())
    assert caught.value.field == "wasm"


def test_a_sym_that_is_not_text_is_refused_naming_sym(tmp_path: Path) -> None:
    (tmp_path / "c.sym").write_bytes(b"1,1,0,main.a\n\xff\xfe")
    with pytest.raises(FormatError) as caught:
        check_sym(tmp_path / "c.sym")
    assert caught.value.field == "sym"


def test_a_format_error_keeps_its_field_across_processes() -> None:
    error = pickle.loads(pickle.dumps(FormatError("r1cs", "is truncated")))
    assert (error.field, error.message, str(error)) == ("r1cs", "is truncated", "is truncated")

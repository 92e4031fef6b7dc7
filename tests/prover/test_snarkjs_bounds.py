"""The snarkjs readers never allocate more than a file can justify, and say what is wrong
with a malformed file without naming the folder it lies in."""

from __future__ import annotations

import struct
import tracemalloc
from pathlib import Path

import pytest

from engine.prover.snarkjs import FormatError, read_wtns, read_zkey

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "snarkjs"
MiB = 1 << 20


def sections(data: bytes) -> dict[int, tuple[int, int]]:
    """{section id: (payload offset, size)} of a binfile."""
    (count,) = struct.unpack_from("<I", data, 8)
    pos, found = 12, {}
    for _ in range(count):
        sid, size = struct.unpack_from("<IQ", data, pos)
        found[sid] = (pos + 12, size)
        pos += 12 + size
    return found


def zkey_with(folder: str = "bn128", **fields: int) -> bytes:
    """The fixture zkey with some of nVars / nPublic / domainSize in its header replaced."""
    data = bytearray((FIXTURES / folder / "circuit.zkey").read_bytes())
    offset, _ = sections(bytes(data))[2]
    (n8q,) = struct.unpack_from("<I", data, offset)
    at = offset + 4 + n8q + 4 + 32
    order = ("n_vars", "n_public", "domain_size")
    values = list(struct.unpack_from("<III", data, at))
    for name, value in fields.items():
        values[order.index(name)] = value
    struct.pack_into("<III", data, at, *values)
    return bytes(data)


def peak_while(action) -> int:
    """Peak traced allocation (Python and numpy) while ``action`` runs, in bytes."""
    tracemalloc.start()
    try:
        action()
    except FormatError:
        pass
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak


def test_a_small_zkey_declaring_a_2_27_domain_is_refused_before_anything_domain_sized_is_allocated(
        tmp_path: Path) -> None:
    # Larger domains are refused the same way (tests/api/test_upload_validation.py sends
    # 2^28); here only 2^27, since the reader this replaced allocated gigabytes for it.
    path = tmp_path / "huge.zkey"
    path.write_bytes(zkey_with(domain_size=1 << 27))
    assert path.stat().st_size < 128 * 1024
    with pytest.raises(FormatError, match="section 9"):
        read_zkey(path)
    assert peak_while(lambda: read_zkey(path)) < 4 * MiB


def test_a_zkey_whose_sections_disagree_with_nvars_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "vars.zkey"
    path.write_bytes(zkey_with(n_vars=205))
    with pytest.raises(FormatError, match="nVars = 205"):
        read_zkey(path)


def test_a_zkey_with_more_public_signals_than_signals_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "public.zkey"
    path.write_bytes(zkey_with(n_public=204))
    with pytest.raises(FormatError, match="nPublic = 204"):
        read_zkey(path)


def test_a_domain_beyond_the_fields_two_adicity_is_refused_from_the_header_alone() -> None:
    # Checked on the header bytes: a whole-file reader without the check would allocate
    # 2^31-row arrays before finding out.
    from engine.prover.snarkjs import zkey_header

    data = zkey_with(domain_size=1 << 31)  # BN254's scalar field has 2^28 roots of unity
    offset, size = sections(data)[2]
    with pytest.raises(FormatError, match="2\\^28"):
        zkey_header(data[offset:offset + size])


def test_a_witness_with_a_truncated_header_is_a_format_error(tmp_path: Path) -> None:
    head = struct.pack("<I", 32) + b"\x01" * 8  # n8, then 8 of the prime's 32 bytes
    path = tmp_path / "short.wtns"
    path.write_bytes(b"wtns" + struct.pack("<II", 2, 2) + struct.pack("<IQ", 1, len(head)) + head
                     + struct.pack("<IQ", 2, 0))
    with pytest.raises(FormatError, match="header"):
        read_wtns(path)


def test_a_witness_declaring_more_values_than_it_holds_is_refused(tmp_path: Path) -> None:
    data = bytearray((FIXTURES / "bn128" / "witness.wtns").read_bytes())
    offset, _ = sections(bytes(data))[1]
    struct.pack_into("<I", data, offset + 36, 1 << 31)
    path = tmp_path / "count.wtns"
    path.write_bytes(bytes(data))
    with pytest.raises(FormatError, match="declares 2147483648 values"):
        read_wtns(path)


def test_reader_errors_name_the_file_but_not_its_folder(tmp_path: Path) -> None:
    folder = tmp_path / "uploads" / "4711"
    folder.mkdir(parents=True)
    (folder / "circuit.zkey").write_bytes(zkey_with(domain_size=1 << 27))
    with pytest.raises(FormatError) as caught:
        read_zkey(folder / "circuit.zkey")
    assert "circuit.zkey" in str(caught.value)
    assert str(tmp_path) not in str(caught.value) and "4711" not in str(caught.value)

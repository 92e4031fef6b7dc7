"""Client inputs, sizes and public inputs of the four kinds."""

from __future__ import annotations

import pytest

from engine.circuits import sizing
from engine.circuits.compiled import compiled_shape
from engine.circuits.kinds import SIZES, InputError, circuit_for, validate_inputs
from engine.circuits.merkle import SectorTree
from engine.circuits.poseidon import hash2
from engine.circuits.sizing import PROVER_START_ARRAYS, PROVER_WORK_ARRAYS, compiled_bytes, key_matrix_entries
from engine.states import MAX_WINDOW_POST_PARTITIONS

SEED = "AB" * 32
RAND = "cd" * 32
DATA = "ef" * 32


def inputs_for(kind: str, **extra) -> dict:
    base = {"sector_seed": SEED, "randomness": RAND}
    if kind == "snap-update":
        base["data_seed"] = DATA
    return base | extra


@pytest.mark.parametrize(("kind", "partitions"), [("winning-post", 1), ("porep-c2", 10), ("snap-update", 16)])
def test_fixed_kinds_have_their_partition_count(kind: str, partitions: int) -> None:
    normalised, n = validate_inputs(kind, inputs_for(kind))
    assert n == partitions
    assert normalised["sector_seed"] == SEED.lower()


def test_window_post_takes_its_partition_count_from_the_request() -> None:
    assert validate_inputs("window-post", inputs_for("window-post", partitions=7)) == (
        {"sector_seed": SEED.lower(), "randomness": RAND, "partitions": 7},
        7,
    )
    assert validate_inputs("window-post", inputs_for("window-post"))[1] == 1


@pytest.mark.parametrize(
    ("kind", "inputs", "field"),
    [
        ("winning-post", {"randomness": RAND}, "sector_seed"),
        ("winning-post", {"sector_seed": "zz" * 32, "randomness": RAND}, "sector_seed"),
        ("winning-post", {"sector_seed": SEED[:-2], "randomness": RAND}, "sector_seed"),
        ("winning-post", {"sector_seed": SEED, "randomness": 5}, "randomness"),
        ("window-post", {"sector_seed": SEED, "randomness": RAND, "partitions": True}, "partitions"),
        ("window-post", {"sector_seed": SEED, "randomness": RAND, "partitions": 0}, "partitions"),
        ("window-post", {"sector_seed": SEED, "randomness": RAND, "partitions": MAX_WINDOW_POST_PARTITIONS + 1}, "partitions"),
        ("window-post", {"sector_seed": SEED, "randomness": RAND, "partitions": "3"}, "partitions"),
        ("porep-c2", {"sector_seed": SEED, "randomness": RAND, "partitions": 3}, "partitions"),
        ("snap-update", {"sector_seed": SEED, "randomness": RAND}, "data_seed"),
        ("winning-post", {"sector_seed": SEED, "randomness": RAND, "data_seed": DATA}, "data_seed"),
        ("winning-post", {"sector_seed": SEED, "randomness": RAND, "extra": 1}, "extra"),
        ("winning-post", ["not", "an", "object"], "inputs"),
        ("custom", {}, "kind"),
        ("nonsense", {}, "kind"),
    ],
)
def test_malformed_inputs_name_the_offending_field(kind: str, inputs, field: str) -> None:
    with pytest.raises(InputError) as info:
        validate_inputs(kind, inputs)
    assert info.value.field == field


# The power of two each circuit is sized to fill (constraints + publics + 1 within it).
DOMAINS = {
    "tiny": {"winning-post": 2**10, "window-post": 2**10, "porep-c2": 2**10, "snap-update": 2**11},
    "small": {"winning-post": 2**12, "window-post": 2**12, "porep-c2": 2**13, "snap-update": 2**12},
    "medium": {k: 2**16 for k in SIZES},
}


@pytest.mark.parametrize("scale", ["tiny", "small", "medium"])
@pytest.mark.parametrize("kind", list(SIZES))
def test_each_circuit_fills_the_domain_of_its_scale(kind: str, scale: str) -> None:
    shape = circuit_for(kind, scale)
    assert shape.domain_size == DOMAINS[scale][kind]
    assert shape.n_constraints > shape.domain_size // 2


@pytest.mark.parametrize("scale", ["tiny", "small"])
@pytest.mark.parametrize("kind", list(SIZES))
def test_counted_sizes_equal_the_compiled_matrices(kind: str, scale: str) -> None:
    shape = circuit_for(kind, scale)
    r1cs = shape.r1cs()
    assert (shape.n_constraints, shape.n_vars, shape.n_public) == (r1cs.n_constraints, r1cs.n_vars, r1cs.n_public)
    assert shape.domain_size == r1cs.domain_size


def test_memory_needs_follow_the_circuit_sizes() -> None:
    shape = circuit_for("porep-c2", "small")
    need = shape.memory
    assert need.witness_bytes == shape.n_vars * 32
    assert need.abc_bytes == 3 * 8192 * 32
    # A, B1, C, H, IC and the vk's three in G1 (96 bytes), B2 and the vk's three in G2 (192
    # bytes), as the zkey stores them; then the A and B matrices, 40 bytes an entry.
    n, p = shape.n_vars, shape.n_public
    points = 96 * (2 * n + (n - p - 1) + 8192 + p + 1 + 3) + 192 * (n + 3)
    a, b = key_matrix_entries(shape)
    assert need.key_bytes == points + 40 * (a + b) + 2 * 8 * (8192 + 1)


def test_a_partition_reserves_the_provers_working_arrays_and_frees_them_with_its_products() -> None:
    """Witness and a/b/c alone were a fifth of what a porep-c2/large partition peaked at in the
    engine (bench/results/scale.md): the prover's H-phase arrays and copies are reserved too."""
    need = circuit_for("porep-c2", "small").memory
    assert need.work_bytes == PROVER_WORK_ARRAYS * 8192 * 32
    assert need.partition_bytes == need.witness_bytes + need.abc_bytes + need.work_bytes
    # H and four MSMs are done when gpu_prove_start returns; the G2 MSM's share is held to the end
    assert need.released_bytes == need.abc_bytes + PROVER_START_ARRAYS * 8192 * 32


@pytest.mark.parametrize("scale", ["tiny", "small"])
@pytest.mark.parametrize("kind", list(SIZES))
def test_key_matrix_entries_without_compiling_equal_the_compiled_ones(kind: str, scale: str) -> None:
    shape = circuit_for(kind, scale)
    r1cs = shape.r1cs()
    # the key's A has one more row per public input and the one
    assert key_matrix_entries(shape) == (r1cs.a.cols.size + r1cs.n_public + 1, r1cs.b.cols.size)


@pytest.mark.parametrize("scale", ["tiny", "small"])
@pytest.mark.parametrize("kind", list(SIZES))
def test_the_compiled_matrices_estimate_is_what_a_synthesis_process_keeps(kind: str, scale: str,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A synthesis process keeps its circuit's compiled A, B and C and its witness program for
    its next partitions; the engine reserves this for them before the process first compiles
    (or reads) them."""
    shape = circuit_for(kind, scale)
    # counted without the compiled shape, as the engine counts before it compiles
    monkeypatch.setattr(sizing, "_COUNTS", {})
    monkeypatch.setattr(sizing, "already_compiled", lambda shape: None)
    estimate = compiled_bytes(shape)
    monkeypatch.undo()
    done = compiled_shape(shape)
    held = sum(m.row_ptr.nbytes + m.cols.nbytes + m.coeffs.nbytes for m in (done.r1cs.a, done.r1cs.b, done.r1cs.c))
    held += done.program.nbytes
    # the program's table of distinct coefficients is counted at its bound
    table = done.program.coefficients.nbytes
    assert estimate == held - table + sizing.COEFFICIENT_TABLE_ROWS * 32 and table <= sizing.COEFFICIENT_TABLE_ROWS * 32


@pytest.mark.parametrize("kind", list(SIZES))
def test_the_key_estimate_is_what_a_loaded_key_holds(kind: str) -> None:
    """The key cache reserves this before the key is read: short of the key, a cached key
    outgrew its reservation (porep-c2/medium by 30 %, its matrices)."""
    from engine.prover.setup import setup

    shape = circuit_for(kind, "tiny")
    pk, _ = setup(shape.r1cs(), seed=1)
    assert shape.memory.key_bytes == pk.nbytes


def test_circuit_ids_name_kind_and_scale() -> None:
    shape = circuit_for("snap-update", "tiny")
    assert (shape.circuit_id, shape.kind, shape.scale, shape.curve) == ("snap-update/tiny", "snap-update", "tiny", "bls12381")


def test_public_inputs_are_the_sector_root_then_the_challenges() -> None:
    shape = circuit_for("porep-c2", "tiny")
    seed = int(SEED, 16) % 0x73EDA753299D7D483339D80809A1D80553BDA402FFFE5BFEFFFFFFFF00000001
    root = SectorTree(shape.depth, lambda i: hash2(seed, i)).root
    first = shape.public_inputs(inputs_for("porep-c2"), 0)
    assert first[0] == root
    assert len(first) == 1 + shape.challenges
    assert all(0 <= c < 2**shape.depth for c in first[1:])
    others = [shape.public_inputs(inputs_for("porep-c2"), i)[1:] for i in range(1, 10)]
    assert any(o != first[1:] for o in others)  # partitions open different leaves


def test_snap_update_publics_carry_both_commitments_and_rho() -> None:
    shape = circuit_for("snap-update", "tiny")
    publics = shape.public_inputs(inputs_for("snap-update"), 3)
    assert len(publics) == 3 + shape.challenges
    assert publics[0] != publics[1]


def test_unknown_scale_is_an_input_error() -> None:
    with pytest.raises(InputError) as info:
        circuit_for("winning-post", "huge")
    assert info.value.field == "scale"

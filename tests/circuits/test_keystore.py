"""The params directory: setup once, checksummed loads, clear errors naming the fix."""

from __future__ import annotations

import json
import shutil

import pytest
from django.core.management import call_command

from engine.circuits import keystore
from engine.circuits.keystore import KeyStore
from engine.circuits.kinds import circuit_for

pytestmark = pytest.mark.django_db(databases=[])


@pytest.fixture(scope="module")
def made_once(tmp_path_factory):
    """winning-post/tiny keys from one setup, copied into each test's params directory."""
    base = tmp_path_factory.mktemp("params-once")
    KeyStore(base).ensure_keys(circuit_for("winning-post", "tiny"), seed=3)
    return base


@pytest.fixture
def params(tmp_path):
    return tmp_path / "params"


@pytest.fixture
def keys(params) -> KeyStore:
    return KeyStore(params)


@pytest.fixture
def keys_made(params, made_once) -> KeyStore:
    shutil.copytree(made_once, params)
    return KeyStore(params)


def test_ensure_keys_writes_zkey_vk_and_a_manifest_entry(keys_made, params) -> None:
    shape = circuit_for("winning-post", "tiny")
    path = keys_made.proving_key_path(shape.circuit_id)
    assert path == params / "winning-post-tiny.zkey" == keys_made.proving_key_path(shape.circuit_id)
    entry = json.loads((params / "manifest.json").read_text())["winning-post/tiny"]
    assert entry["curve"] == "bls12381"
    assert entry["n_constraints"] == shape.n_constraints
    assert entry["zkey"]["sha256"] == keystore.sha256_file(path)
    assert entry["verification_key"]["sha256"] == keystore.sha256_file(keys_made.verifying_key_path(shape.circuit_id))


def test_ensure_keys_runs_the_setup_only_once(keys_made) -> None:
    shape = circuit_for("winning-post", "tiny")
    before = keys_made.proving_key_path(shape.circuit_id).stat().st_mtime_ns
    keys_made.ensure_keys(shape)
    assert keys_made.proving_key_path(shape.circuit_id).stat().st_mtime_ns == before


def test_loaded_key_fits_the_circuit(keys_made) -> None:
    shape = circuit_for("winning-post", "tiny")
    pk = keys_made.load_proving_key(shape.circuit_id)
    assert keystore.key_sizes(pk) == (shape.n_vars, shape.n_public, shape.domain_size)
    assert keys_made.load_verifying_key(shape.circuit_id).n_public == shape.n_public


def test_memory_estimate_matches_everything_the_loaded_key_holds(keys_made) -> None:
    shape = circuit_for("winning-post", "tiny")
    pk = keys_made.load_proving_key(shape.circuit_id)
    # its point arrays and its A and B matrices, which the prover keeps with them
    assert shape.memory.key_bytes == pk.nbytes


def test_the_memory_estimate_bounds_the_loaded_keys_fixed_base_tables(keys_made) -> None:
    from engine.prover.backends.cpu import fixed_base

    shape = circuit_for("winning-post", "tiny")
    pk = keys_made.load_proving_key(shape.circuit_id)
    assert 0 < fixed_base.precompute(pk) <= shape.memory.table_bytes


def test_a_missing_key_names_the_file_and_the_command(keys) -> None:
    with pytest.raises(keystore.KeyMissing) as info:
        keys.load_proving_key("porep-c2/tiny")
    assert "porep-c2-tiny.zkey" in str(info.value)
    assert "manage.py setupkeys --kind porep-c2 --scale tiny" in str(info.value)


def test_a_corrupt_key_fails_its_checksum(keys_made) -> None:
    shape = circuit_for("winning-post", "tiny")
    path = keys_made.proving_key_path(shape.circuit_id)
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(keystore.KeyCorrupt) as info:
        keys_made.load_proving_key(shape.circuit_id)
    assert str(path) in str(info.value) and "setupkeys --kind winning-post --scale tiny" in str(info.value)


@pytest.mark.django_db  # it records the keys it makes or finds as the farm's (FarmKey)
def test_setupkeys_reports_progress_per_circuit(keys_made, params, settings, capsys) -> None:
    settings.PROVINGSITE = {**settings.PROVINGSITE, "PARAMS_DIR": params}
    call_command("setupkeys", "--kind", "winning-post", "--kind", "window-post", "--scale", "tiny")
    out = capsys.readouterr().out
    assert "[1/2] winning-post/tiny: keys present and checksummed, skipped" in out
    assert "[2/2] window-post/tiny: 845 constraints" in out and "wrote window-post-tiny.zkey" in out
    assert keys_made.load_proving_key("window-post/tiny").n_vars == circuit_for("window-post", "tiny").n_vars

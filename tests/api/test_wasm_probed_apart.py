"""Registering a circuit compiles nothing of the client's .wasm in the web process: its field and
input signals are probed in a child process with a time and a memory limit, and a module past
either limit is refused with a 400 naming the wasm."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import wasmtime
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from engine.models import Circuit
from engine.prover.formats import wasm_probe
from engine.prover.formats.wasm_witness import WitnessError
from tests.hostile_wasm import LOOPS, bulky, generator

# Where the client's wasm is compiled is the subject; its rows are those of any circuit.
pytestmark = [pytest.mark.django_db, pytest.mark.database_agnostic]

ZKEY = Path(__file__).resolve().parents[1] / "fixtures" / "snarkjs" / "bn128" / "circuit.zkey"


@pytest.fixture
def no_compiling_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any wasm compiled in this process (the web process, in these tests) fails the test."""
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a client's .wasm was compiled in the web process")

    monkeypatch.setattr(wasmtime, "Module", refuse)


def register(api: Client, wasm: bytes) -> Any:
    return api.post("/api/v1/circuits", {"zkey": SimpleUploadedFile("c.zkey", ZKEY.read_bytes()),
                                         "wasm": SimpleUploadedFile("c.wasm", wasm)})


def test_a_registration_probes_the_wasm_in_a_child_process(api: Client, uploads: Path,
                                                           no_compiling_here: None) -> None:
    response = register(api, generator(LOOPS))
    assert response.status_code == 201, response.content
    assert response.json()["input_count"] == 1  # read from the module, by the child


def test_a_job_of_a_circuit_whose_signals_were_never_probed_probes_them_apart_too(
        api: Client, uploads: Path, no_compiling_here: None) -> None:
    from engine.api.submit_circuit import SIGNALS_FILE

    circuit = register(api, generator(LOOPS)).json()["id"]
    (Path(Circuit.objects.get(pk=circuit).zkey_path).parent / SIGNALS_FILE).unlink()  # as when a .wasm joins later
    response = api.post("/api/v1/jobs", {"circuit": circuit, "job_id": "probed", "inputs": {"x": "3"}},
                        content_type="application/json")
    assert response.status_code == 201, response.content


def test_a_module_that_takes_longer_than_its_limit_to_probe_is_refused_naming_the_wasm(
        api: Client, uploads: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(wasm_probe, "PROBE_SECONDS", 1.0)
    response = register(api, bulky(30))  # about 5 s of CPU to compile, even unoptimised
    assert response.status_code == 400 and response.json()["field"] == "wasm"
    assert "took longer than the limit of 1 s" in response.json()["detail"]
    assert not Circuit.objects.exists()


def test_a_module_that_needs_more_memory_than_its_limit_to_probe_is_refused(tmp_path: Path) -> None:
    module = tmp_path / "big.wasm"
    module.write_bytes(bulky(30))  # about 350 MiB resident to compile
    with pytest.raises(WitnessError, match="needed more than the limit of 256 MiB of memory"):
        wasm_probe.probe_apart(module, memory=256 << 20)


def test_the_memory_limit_grows_with_the_module_s_real_size() -> None:
    assert wasm_probe.memory_for(30_000_000) - wasm_probe.memory_for(0) == 30_000_000 * wasm_probe.PROBE_MEMORY_PER_BYTE

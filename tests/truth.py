"""What "the console never lies" means, as checks on one read of the farm.

``status_contradictions`` checks a ``/status`` body and ``page_contradictions`` a full console
render; each returns every contradiction it finds (empty when the read is the truth)."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from engine.states import JOB_ACTIVE, PARTITION_HOLDING, PARTITION_LIVE
from engine.status.holdings import holder_of

_HOLDING = {str(s) for s in PARTITION_HOLDING}
_CLAIMED = {str(s) for s in PARTITION_LIVE}

_CELL = re.compile(r'class="cell [^"]*" data-partition="([^"]+)" data-state="([^"]+)" data-version="([^"]+)"')
_CARD = re.compile(r'class="card [^"]*" data-worker="([^"]+)" data-state="([^"]+)" data-partition="([^"]*)" '
                   r'data-version="([^"]+)"')


def status_contradictions(snap: dict[str, Any]) -> list[str]:
    """Worker vs partition both ways, counters vs pipelines, memory vs reservations."""
    found: list[str] = []
    if not snap["consistent"]:
        found.append(f"v{snap['version']}: not read in one snapshot")
    on_gpu = {(p["host"], p["worker"], pipe["job_id"], p["index"])
              for pipe in snap["pipelines"] for p in pipe["partitions"] if p["state"] == "gpu"}
    # a worker proving a batch shows every member (current_partitions); alone, its one partition
    shown = {(w["host"], w["label"], job, index)
             for w in snap["gpu_workers"] if w["state"] == "proving"
             for job, index in (w.get("current_partitions") or [(w["current_job"], w["current_partition"])])}
    for host, label, job, index in sorted(on_gpu - shown, key=str):
        found.append(f"v{snap['version']}: partition ({job}, {index}) in gpu but {host}/{label} does not show it")
    for host, label, job, index in sorted(shown - on_gpu, key=str):
        found.append(f"v{snap['version']}: {host}/{label} proving ({job}, {index}), which is not in gpu")
    per_state = Counter(pipe["state"] for pipe in snap["pipelines"])
    for state in JOB_ACTIVE:
        if snap["counters"]["by_state"].get(state, 0) != per_state.get(state, 0):
            found.append(f"v{snap['version']}: counters say {snap['counters']['by_state'].get(state, 0)} {state}, "
                         f"pipelines show {per_state.get(state, 0)}")
    for pipe in snap["pipelines"]:
        done = sum(p["state"] == "done" for p in pipe["partitions"])
        if pipe["partitions_done"] != done:
            found.append(f"v{snap['version']}: {pipe['job_id']} counts {pipe['partitions_done']} done of {done} shown")
    synthesizing = Counter(p["host"] for pipe in snap["pipelines"] for p in pipe["partitions"]
                           if p["state"] == "synthesizing")
    for host in snap["hosts"]:
        if not host["stopped"] and host["synthesis"]["active"] != synthesizing.get(host["name"], 0):
            found.append(f"v{snap['version']}: {host['name']} shows {host['synthesis']['active']} synthesizing, "
                         f"cells show {synthesizing.get(host['name'], 0)}")
        memory = host["memory"]
        if memory["used_bytes"] != sum(memory["by_owner"].values()):
            found.append(f"v{snap['version']}: {host['name']} uses {memory['used_bytes']} bytes, "
                         f"reservations shown sum to {sum(memory['by_owner'].values())}")
    found += _claims_contradictions(snap)
    return found


def _claims_contradictions(snap: dict[str, Any]) -> list[str]:
    """Pending and reserving figures vs cells; memory owners and key users vs claimed cells."""
    found: list[str] = []
    cells = [(pipe, p) for pipe in snap["pipelines"] for p in pipe["partitions"]]
    counted = Counter(p["state"] for _, p in cells)
    for state in ("pending", "reserving"):
        figure = snap["counters"].get(f"{state}_partitions", 0)
        if figure != counted.get(state, 0):
            found.append(f"v{snap['version']}: counters say {figure} {state}, cells show {counted.get(state, 0)}")
    holding = {(p["host"], f"{pipe['proof_kind']} {pipe['job_id']}") for pipe, p in cells if p["state"] in _HOLDING}
    claimed = Counter((p["host"], pipe["proof_kind"]) for pipe, p in cells if p["state"] in _CLAIMED)
    for host in snap["hosts"]:
        for owner, size in host["memory"]["by_owner"].items():
            # keys, and what the engine holds for itself (its processes, compiled matrices, a
            # load's buffers: engine.status.holdings.engine_held), are no partition's
            if size and holder_of(owner) == "job" and (host["name"], owner) not in holding:
                found.append(f"v{snap['version']}: {host['name']} shows memory held by {owner}, which holds no partition")
        for key in host["allocations"]["srs"]:
            users = claimed.get((host["name"], key["circuit_id"].split("/", 1)[0]), 0)
            # a registered circuit's jobs are of kind custom: their users are not countable here
            if "/" in key["circuit_id"] and key["in_use"] != users:
                found.append(f"v{snap['version']}: key {key['circuit_id']} on {host['name']} has {key['in_use']} users, "
                             f"cells show {users} claimed")
    return found


def page_contradictions(html: str) -> list[str]:
    """Worker cards and the synthesis count vs partition cells of one render; no inexact stamp."""
    found: list[str] = []
    active = re.search(r"<span data-synthesis-active>(\d+)</span>", html)
    cells_synthesizing = sum(state == "synthesizing" for _, state, _ in _CELL.findall(html))
    if active and int(active.group(1)) != cells_synthesizing:
        found.append(f"synthesis says {active.group(1)} active, cells show {cells_synthesizing}")
    cells = {partition: state for partition, state, _ in _CELL.findall(html)}
    stamps = {v for *_, v in _CELL.findall(html)} | {v for *_, v in _CARD.findall(html)}
    if any(v.endswith("+") for v in stamps):
        found.append(f"an inexact stamp among {sorted(stamps)}")
    # a card proving a batch names every member, space-separated
    proving = {partition: worker for worker, state, partitions, _ in _CARD.findall(html) if state == "proving"
               for partition in partitions.split()}
    for partition, worker in proving.items():
        if cells.get(partition) != "gpu":
            found.append(f"card {worker} proving {partition}, whose cell says {cells.get(partition)}")
    for partition, state in cells.items():
        if state == "gpu" and partition not in proving:
            found.append(f"cell {partition} in gpu, but no card shows it")
    return found

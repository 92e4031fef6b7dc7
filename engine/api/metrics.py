"""GET /metrics: Prometheus text, every figure read from the records at scrape time.

A custom collector rather than counters bumped in code: the engine runs in other processes
(one per host), so only the database knows the farm's totals, and reading them at scrape time
means a restart never resets or double counts anything. Histograms come from the
partitions' phase timestamps (engine.status.histograms, each phase as engine.figures defines
it), so they are exact and cumulative because the history is kept.

Access: ``Authorization: Bearer <PROVINGSITE_METRICS_TOKEN>`` or a client address in
``PROVINGSITE_METRICS_ALLOW`` (REMOTE_ADDR only; a forwarded header is not trusted).
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Iterator
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from engine.api.auth import bearer_token
from engine.api.errors import body
from engine.api.peer import client_address
from engine.figures import PHASES, UTILISATION
from engine.status.farm import farm_document
from engine.status.histograms import phase_histograms, proof_histograms
from engine.status.read_model import Farm, live_farm


class RecordsCollector:
    """Reads the farm from the database each time Prometheus scrapes."""

    def collect(self) -> Iterator[Metric]:
        # Every family from one snapshot: a scrape never mixes two moments of the farm.
        with live_farm() as farm:
            snap = farm_document(farm)
            families = [*self._jobs(snap, farm), *self._durations(), *self._hosts(snap), *self._workers(snap)]
        yield from families

    def _jobs(self, snap: dict[str, Any], farm: Farm) -> Iterable[Metric]:
        counters = snap["counters"]
        completed = CounterMetricFamily("provingsite_proofs_completed", "Jobs proved and verified, by kind",
                                        labels=["kind"])
        for kind, n in counters["completed_by_kind"].items():
            completed.add_metric([kind], n)
        failed = CounterMetricFamily("provingsite_proofs_failed", "Jobs that failed, by kind", labels=["kind"])
        for kind, n in counters["failed_by_kind"].items():
            failed.add_metric([kind], n)
        jobs = GaugeMetricFamily("provingsite_jobs", "Jobs by state", labels=["state"])
        for state, n in counters["by_state"].items():
            jobs.add_metric([state], n)
        missed = CounterMetricFamily("provingsite_deadline_missed", "Jobs finished after their deadline, by kind",
                                     labels=["kind"])
        for kind, n in farm.missed_deadlines.items():
            missed.add_metric([kind], n)
        yield completed
        yield failed
        yield missed
        yield jobs
        yield GaugeMetricFamily("provingsite_jobs_at_risk",
                                "Active jobs expected to finish after their deadline, which has not passed yet",
                                value=sum(p["at_risk"] for p in snap["pipelines"]))
        yield GaugeMetricFamily("provingsite_jobs_late", "Active jobs whose deadline has passed",
                                value=sum(p["late"] for p in snap["pipelines"]))
        yield GaugeMetricFamily("provingsite_queue_depth", "Jobs queued and not started", value=counters["queue_depth"])
        yield GaugeMetricFamily("provingsite_pending_partitions", "Partitions of active jobs waiting to be claimed",
                                value=counters["pending_partitions"])
        yield GaugeMetricFamily("provingsite_reserving_partitions",
                                "Partitions claimed by a host and waiting for their key and memory",
                                value=counters["reserving_partitions"])
        yield GaugeMetricFamily("provingsite_status_version", "The farm's version: the sum of every writer's status clock", value=snap["version"])

    def _durations(self) -> Iterable[Metric]:
        family = HistogramMetricFamily("provingsite_proof_duration_seconds",
                                       "Per job done, its total: submission to done", labels=["kind"])
        for kind, (buckets, total) in proof_histograms().items():
            family.add_metric([kind], buckets, total)
        yield family
        family = HistogramMetricFamily("provingsite_phase_duration_seconds",
                                       "Per partition's current attempt, each phase as the console names it: "
                                       + "; ".join(f"{f.name}: {f.counts}" for f in PHASES), labels=["kind", "phase"])
        for (kind, phase), (buckets, total) in sorted(phase_histograms().items()):
            family.add_metric([kind, phase], buckets, total)
        yield family

    def _hosts(self, snap: dict[str, Any]) -> Iterable[Metric]:
        g = {name: GaugeMetricFamily(f"provingsite_{name}", doc, labels=labels) for name, doc, labels in [
            ("host_up", "1 while the host is running and its heartbeat is fresh", ["host"]),
            ("host_heartbeat_age_seconds", "Seconds since the host's last heartbeat", ["host"]),
            ("memory_budget_bytes", "Host memory the engine may reserve", ["host"]),
            ("memory_used_bytes", "Host memory reserved now", ["host"]),
            ("memory_physical_bytes", "The host's RAM", ["host"]),
            ("synthesis_active", "Synthesis tasks running", ["host"]),
            ("synthesis_max", "Synthesis tasks allowed at once", ["host"]),
            ("gpu_memory_total_bytes", "Device memory", ["host", "device"]),
            ("gpu_memory_free_bytes", "Device memory free", ["host", "device"]),
            ("key_cache_bytes", "Proving keys held in memory", ["host", "circuit_id"]),
            ("key_bytes", "Proving keys' bytes charged to the host's budget, by residency tier (hot: in memory; "
             "warm: memory-mapped, its mapped pages not counted)", ["host", "circuit", "tier"]),
            ("key_mapped_bytes", "Warm proving keys' memory-mapped image size (page cache, read on demand)",
             ["host", "circuit"]),
            # Measured, not reserved: what the machine itself is doing, whoever holds it.
            ("host_cpu_percent", "The host's CPU use, every CPU busy = 100 (psutil, sampled every heartbeat)", ["host"]),
            ("host_cpu_count", "The host's logical CPUs (sampled every heartbeat)", ["host"]),
            ("host_memory_used_bytes", "The host's RAM in use, total less available (psutil, sampled every heartbeat)",
             ["host"]),
            ("host_memory_total_bytes", "The host's RAM (psutil, sampled every heartbeat)", ["host"]),
            ("engine_rss_bytes", "Resident memory of the engine's process and its children (sampled every heartbeat)",
             ["host"]),
            ("device_utilisation_percent", "Share of the last sample period a kernel ran on the device "
             "(NVML, sampled every heartbeat; absent without NVML)", ["host", "device"]),
            ("device_memory_used_bytes", "Device memory in use, by any process (NVML, sampled every heartbeat)",
             ["host", "device"]),
            ("device_memory_total_bytes", "Device memory (NVML, sampled every heartbeat)", ["host", "device"]),
            ("device_power_watts", "The device's power draw (NVML, sampled every heartbeat)", ["host", "device"]),
            ("engine_thread_down", "1 for each engine thread backing off after a database error at the host's "
             "last heartbeat", ["host", "thread"]),
        ]}
        for host in snap["hosts"]:
            name = host["name"]
            g["host_up"].add_metric([name], 0 if host["stopped"] or host["stale"] else 1)
            if host["heartbeat_age_secs"] is not None:
                g["host_heartbeat_age_seconds"].add_metric([name], host["heartbeat_age_secs"])
            if host["stopped"]:
                continue
            g["memory_budget_bytes"].add_metric([name], host["memory"]["budget_bytes"])
            g["memory_used_bytes"].add_metric([name], host["memory"]["used_bytes"])
            g["memory_physical_bytes"].add_metric([name], host["memory"]["physical_bytes"])
            g["synthesis_active"].add_metric([name], host["synthesis"]["active"])
            g["synthesis_max"].add_metric([name], host["synthesis"]["max_concurrent"])
            for device in host["devices"]:
                g["gpu_memory_total_bytes"].add_metric([name, device["device"]], device["total_bytes"])
                if device["free_bytes"] is not None:
                    g["gpu_memory_free_bytes"].add_metric([name, device["device"]], device["free_bytes"])
            for entry in host["allocations"]["srs"] + host["allocations"]["pce"]:
                g["key_cache_bytes"].add_metric([name, entry["circuit_id"]], entry["bytes"])
                g["key_bytes"].add_metric([name, entry["circuit_id"], entry.get("tier", "hot")], entry["bytes"])
                if entry.get("tier") == "warm":
                    g["key_mapped_bytes"].add_metric([name, entry["circuit_id"]], entry.get("mapped_bytes", 0))
            if not host["stale"]:  # an old sample is no measurement of now
                self._figures(g, name, host["figures"])
        yield from g.values()

    @staticmethod
    def _figures(g: dict[str, GaugeMetricFamily], name: str, figures: dict[str, Any]) -> None:
        """The host's measured figures; one not measured (or that NVML would not give) is left
        out, never reported as 0, so an alert on "no data" fires instead of a false idle."""
        for metric, key in (("host_cpu_percent", "cpu_percent"), ("host_cpu_count", "cpu_count"),
                            ("host_memory_used_bytes", "memory_used_bytes"),
                            ("host_memory_total_bytes", "memory_total_bytes"), ("engine_rss_bytes", "engine_rss_bytes")):
            if figures[key] is not None:
                g[metric].add_metric([name], figures[key])
        for device in figures["devices"]:
            for metric, key in (("device_utilisation_percent", "utilisation_percent"),
                                ("device_memory_used_bytes", "memory_used_bytes"),
                                ("device_memory_total_bytes", "memory_total_bytes"), ("device_power_watts", "power_watts")):
                if device[key] is not None:
                    g[metric].add_metric([name, device["device"]], device[key])
        for down in figures["threads_down"]:
            g["engine_thread_down"].add_metric([name, down["thread"]], 1)

    def _workers(self, snap: dict[str, Any]) -> Iterable[Metric]:
        labels = ["host", "device", "worker"]
        busy = GaugeMetricFamily("provingsite_worker_proving", "1 while a partition is on the worker's GPU", labels=labels)
        util = GaugeMetricFamily("provingsite_worker_utilisation_ratio",
                                 f"The last five minutes' {UTILISATION.name}: {UTILISATION.counts}", labels=labels)
        for w in snap["gpu_workers"]:
            key = [w["host"], w["device"], w["label"]]
            busy.add_metric(key, 1 if w["state"] == "proving" else 0)
            util.add_metric(key, w["utilisation"])
        yield busy
        yield util


def _allowed(request: HttpRequest) -> bool:
    knobs = settings.PROVINGSITE
    expected = str(knobs.get("METRICS_TOKEN") or "")
    presented = bearer_token(request)
    if expected and presented is not None and hmac.compare_digest(presented.encode(), expected.encode()):
        return True
    return client_address(request) in set(knobs.get("METRICS_ALLOW") or [])


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    if not _allowed(request):
        return JsonResponse(body("forbidden", "Authorization",
                                 "send the metrics token as a bearer token, or scrape from an allowed address"),
                            status=403)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(RecordsCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)

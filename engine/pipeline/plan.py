"""How a host's cores and devices are shared out, where the operator left it to the engine.

* Synthesis processes: on a GPU host every core but one per device (its workers stage and
  launch) and one for the engine's own threads (records, finishing, verifying); on a CPU host
  half the cores, the other half proving. On a GPU host they run niced (SYNTHESIS_NICE), so
  whatever the count the engine's threads get a core first and the devices are never starved
  by the synthesis that feeds them; on a CPU host the provers are the cores themselves, and a
  niced synthesis lost to every other process of a busy machine and starved them (bench/engine.py
  at small: 0.62 niced).
* The pacer: per device, this many synthesized partitions kept waiting for a worker; the batch
  size at least (a batch fills from what waits), and at least 2 (one proving, one ready).
* Batching: 4 partitions of one key per launch on a CUDA device (one launch sequence per MSM
  for the four), off on the CPU, where a batch does not beat one proof at a time.
* On a GPU host, circuits so small that the device loses to the CPU (its fixed launch and
  transfer costs) are proved on the CPU: a lane of one CPU worker beside the devices.

0 in a setting means "decide here"; any other value is taken as it is.
"""

from __future__ import annotations

from dataclasses import dataclass

GPU_BATCH = 4


def default_synthesis(cores: int, gpus: int) -> int:
    if gpus:
        return max(1, cores - gpus - 1)
    return max(1, cores // 2)


@dataclass(frozen=True)
class Plan:
    synthesis: int
    pace_ahead: int  # per proving lane
    batch_max: int
    cpu_lane: bool  # a GPU host's CPU worker for small circuits
    cpu_max_domain: int
    nice: int = 0  # how much lower the synthesis processes run

    def pace_target(self, lanes: int) -> int:
        """Partitions synthesizing or waiting for a worker that the dispatcher keeps claimed."""
        return self.synthesis + self.pace_ahead * lanes


def plan(cores: int, gpus: int, synthesis: int = 0, pace_ahead: int = 0, batch_max: int = 0,
         cpu_max_domain: int = 0, nice: int = 0) -> Plan:
    batch = batch_max or (GPU_BATCH if gpus else 1)
    return Plan(synthesis=synthesis or default_synthesis(cores, gpus), pace_ahead=pace_ahead or max(2, batch),
                batch_max=batch, cpu_lane=bool(gpus and cpu_max_domain), cpu_max_domain=cpu_max_domain if gpus else 0,
                nice=nice if gpus else 0)

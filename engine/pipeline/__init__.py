"""The pipeline of one host, stage by stage: claim → reserve → synthesize → prove → finalize.

    lifecycle   a partition's life as one pure state machine: (state, event) -> (state, instructions)
    work        a claimed partition: its fixed facts and what it holds (WorkItem), sized from its circuit
    inflight    the work this host holds; steps each item's lifecycle and hands each instruction to its stage
    claim       the dispatcher: claims queued partitions while there is room (the pacer)
    reserve     the proving key, the memory and the shared blocks a partition needs, held before it starts
    synthesize  assignments computed in a pool of processes (synthesis_process), handed over in
                shared memory (handover)
    prove       proving workers, N per device: only the device's work under its lock
    finalize    finishing on the CPU, verifying, recording done
    supervise   every thread's supervision: a database error backs off, anything else ends the engine
    plan        how the host's cores and devices are shared out (synthesis, pacing, batching, CPU lane)
    host        wires the stages into one engine (only runengine imports it)

keys, keycache, memory and devices are what the stages share: where keys come from, the
keys held in memory, the host's memory budget, and the devices proved on.
"""

"""The pipeline of one host, stage by stage: claim → reserve → synthesize → prove → finalize.

    work        a claimed partition and what it holds (WorkItem), sized from its circuit
    inflight    the work this host holds; the one way a stage reports to the ledger
    claim       the dispatcher: claims queued partitions while there is room (the pacer)
    reserve     the proving key and the memory a partition needs, held before it starts
    synthesize  assignments computed in a pool of processes (synthesis_process)
    prove       proving workers, N per device, launching the kernels
    finalize    finishing on the CPU, verifying, recording done
    host        wires the stages into one engine (only runengine imports it)

keys, keycache, memory and devices are what the stages share: where keys come from, the
keys held in memory, the host's memory budget, and the devices proved on.
"""

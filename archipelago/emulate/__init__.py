"""Functional emulation: run a Plan with one OS process per device and check the result
against the unsplit transformers model.

    launch       the parent: check the request, provide weights, start ranks, summarize
    worker       one rank: process group, the strategy's rank program, results to rank 0
    watchdog     heartbeats, injected faults, failure diagnosis; stops every rank on failure
    reaper       ends every process of a run and removes its directories when the launcher
                 ends, however it ends (a SIGKILL included)
    tensor_parallel  the tensor-parallel kind's emulator (`emulate`): shard loading,
                 greedy generation, reference check
    interpreter  walks a Plan's steps; compute and comm_steps hold one handler per step kind
    state        what a rank carries (weights, KV cache, positions, its Exchange)
    exchange     the only way activations leave a rank: counted, watched collectives
    checkpoint   reads only a rank's slices from safetensors; hf_names maps tensor names
    numerics     norm epsilon and rotary base from the HF config
    reference    the transformers model (the only module here importing transformers)
    job, errors  the request and the error types

The dataflow kind's emulator lives with its plan (`strategies/galapagos/emulate`). Importing
this package imports nothing heavy; torch loads with the modules that need it.
"""

"""The emulation launcher every kind shares: run a plan with one OS process per device.

    launch       the parent: start ranks (the kind's RankProgram provides their weights),
                 watch them, summarize
    worker       one rank: process group, the kind's rank program, results to rank 0
    watchdog     heartbeats, injected faults, failure diagnosis; stops every rank on failure
    reaper       ends every process of a run and removes its directories when the launcher
                 ends, however it ends (a SIGKILL included)
    exchange     the only way activations leave a rank: counted, watched collectives, over
                 gloo or (the launcher's ranks) shared_memory, which waits with futex
    torchrun     the standard RANK/WORLD_SIZE/MASTER_* environment, checked at the edge
    timeline, tokens   where a run's time goes; the tokens each rank has generated
    job, errors  the request and the error types

Each kind's emulator lives in its own package (`strategies/<kind>/emulate`). Importing this
package imports nothing heavy; torch loads with the modules that need it.
"""

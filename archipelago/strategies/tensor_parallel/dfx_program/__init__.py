"""DFX programs (seeds/001 §IV-C, §V): the instruction set, the HBM/DDR layout of a core's
weight shard, the compiler from a dfx Plan to one program per core, the timing and
functional simulators that run those programs, and `archi simulate` (simulate_command.py)."""

"""DFX programs (seeds/001 §IV-C, §V): the instruction set, the HBM/DDR layout of a core's
weight shard, and the compiler from a dfx Plan to one program per core."""

"""LORA's build files (`archi build --strategy lora-f/lora-q`): seeds/002 gives no instruction
set, so a build is what its Control Unit and HLS source are made from: each board's memory
layout (layout.py, kv.py), the synchronization schedule of every block (schedule.py) and
the engine's parameters as a C/C++ header (header.py); emit.py writes them."""

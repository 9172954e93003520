"""Bounds far above any published transformer (the largest have ~128 layers, hidden 16384,
a 256k vocabulary): a size beyond them is a typo that would only make the planner crawl.
ModelSpec validates against them; a family reader bounds what it loops over before that."""

MAX_LAYERS = 1024
MAX_WIDTH = 2**18  # hidden, ffn and embedding projection widths
MAX_HEADS = 4096
MAX_VOCAB = 2**22
MAX_POSITIONS = 2**22
MAX_EXPERTS = 4096  # DeepSeek-V3 routes over 256

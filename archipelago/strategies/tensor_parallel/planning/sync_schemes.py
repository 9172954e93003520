"""The two synchronization schemes of the seeds, as data (sync.py says what each field means).

`dfx` (seeds/001 §IV-B, Algorithm 1): Q/K/V split head-wise, every other matrix split
column-wise, each partial output all-gathered (after attention, the attention projection,
FFN1+GELU and FFN2, Algorithm 1 lines 13, 15, 22, 24) while compute stalls; LayerNorm and
residual run replicated, the final norm and LM head whole on every core.

`lora` (seeds/002 §III): the residual stream stays column-split, so residuals and
LayerNorm run on local columns (LayerNorm parameters split too) with an all-reduce of the
partial sums; activations are all-gathered only where a matmul needs global data (before
QKV, the attention projection, FC0 and FC1, §III-A, and before the LM head): four
all-gathers and two all-reduces per block, hidden behind compute by row packing, early
broadcast of SmulV's output head by head (§III-B) and column-major traversal. Matrices are
mirrored in DDR for the prefill (§V-C).

Latent attention's absorbed form (graph.absorbed_block) ends its heads' work with `v_up`
(each head's latent context taken to v_dim) rather than the attention context: both
schemes gather that instead, at the same width (all heads' v_dim), LORA head by head.
"""

from archipelago.strategies.tensor_parallel.planning.sync import Scheme, register_scheme

DFX = register_scheme(Scheme(
    "dfx", gather_after=("attn_context", "v_up", "attn_out", "ffn_act", "ffn_down")))
LORA = register_scheme(Scheme(
    "lora", gather_after=("attn_norm", "attn_context", "v_up", "ffn_norm", "ffn_act",
                          "final_norm"),
    early=frozenset({"attn_context", "v_up"}), overlap="matmul_blocks", column_residual=True,
    vocab_split=True, matrix_mirror="ddr"))

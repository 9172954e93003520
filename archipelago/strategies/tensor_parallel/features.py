"""The model features the tensor-parallel kind declares when it registers: those its plans
split, and the fewer its emulator runs (`registry.PlanKind.supports` / `emulates`).

Left out of the plans: norms over a split width or after each sublayer (where would DFX's
and LORA's syncs go?), DeepSeek's latent attention, and layers of two kinds, since a plan
repeats one block template. A mixture of experts splits like any FFN (experts.py places
whole experts instead); parallel blocks' sublayers each split as their sequential twin.
"""

from archipelago.models import features as F

SPLITS = F.BUILTIN - {F.WIDTH_QK_NORMS, F.OUTPUT_NORMS, F.BOTH_NORMS, F.LATENT_ATTENTION,
                      F.MIXED_SLIDING, F.MIXED_DENSE_MOE}
# What the emulator's handlers compute (emulate/compute.py) for the families whose
# checkpoints it reads: the plain GPT-2/OPT/LLaMA blocks, and Mistral's, Qwen's and
# Mixtral's additions.
EMULATES = frozenset({F.GATED_MLP, F.BIASES, F.RMSNORM, F.POST_NORM, F.GROUPED_QUERY,
                      F.EXPLICIT_HEAD_DIM, F.UNEVEN_OUT_BIAS, F.SLIDING_WINDOW,
                      F.HEAD_QK_NORMS, F.EXPERTS})

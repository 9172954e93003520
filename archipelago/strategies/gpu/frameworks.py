"""How the host drives the GPU: named framework profiles, each the host's cost per kernel it
issues, per generated token and per generation call.

    transformers-generate  `gpu-eager`: transformers' `generate` as a user runs it. Every
                           kernel issued from Python (eager.py counts them per op), then per
                           token its loop's own work: preparing the inputs and the cache
                           position, the logits processors and the argmax, appending the
                           token, the stopping criteria (whose `.any()` waits for the GPU),
                           and once per call its set-up (generation config, model kwargs,
                           the cache, the causal mask).
    cuda-graph             `gpu-graph`: what TensorRT-LLM- and vLLM-style engines reach. Each
                           decode step is one CUDA graph launch (one kernel per op inside);
                           the prompt runs once through the same kernels issued op by op (as
                           vLLM captures graphs for decode batch shapes only, and as the
                           calibration's lean decoder does).

The constants are fitted by `python -m benchmarks.fit_gpu` to issue 33's calibration points
(one H100 SXM with a Xeon host, PyTorch 2.x, transformers 5.x, batch 1, FP16), only where
no source pins them; each states its plausible range.
"""

# PyTorch's host cost to issue one kernel from Python: the op's Python call, the dispatcher,
# the kernel choice and cudaLaunchKernel. Fitted to the graph rows' prompts (gpt2-345m's 64
# tokens in 8.69 ms over 339 kernels, llama2-7b's 128 in 12.24 ms over 483, both issued op
# by op; each alone gives 25.5 and 25.2 us). Plausible range 5-40 us: J. Lin, "From
# PyTorch op to kernel launch" puts the path at 5-25 us per op, more for a module's Python
# around it.
PYTORCH_OP_S = 25.33e-6
# transformers' `generate` per generated token beyond its kernels: fitted to llama2-7b's
# eager decode step (35.588 ms against 1,322 kernels issued). Plausible range 0.2-3 ms (its
# loop runs tens of Python-level tensor ops and one device synchronization per token).
GENERATE_TOKEN_S = 2.007e-3
# transformers' `generate` once per call before the prompt's forward: fitted to llama2-7b's
# eager prefill (46.7 ms). Plausible range 2-15 ms (generation-config validation, logits
# processors, cache allocation, the 4-D causal mask built for the prompt).
GENERATE_CALL_S = 11.11e-3

PROFILES: dict[str, dict[str, float | bool]] = {
    "transformers-generate": {"graph": False, "host_op_s": PYTORCH_OP_S,
                              "token_s": GENERATE_TOKEN_S, "call_s": GENERATE_CALL_S},
    "cuda-graph": {"graph": True, "host_op_s": PYTORCH_OP_S, "token_s": 0.0, "call_s": 0.0},
}

"""Measured batch-1 generation on a CUDA GPU, in the two modes the gpu kind estimates.

    eager  transformers' `generate` (every op issued from Python)
    graph  one CUDA graph per decode step: a static KV cache and the forward compiled with
           torch.compile(mode="reduce-overhead"), which captures and replays CUDA graphs

For each built-in decoder it loads seeded random FP16 weights of the zoo's configuration
(tokens/s does not depend on the weights), generates --new tokens greedily after a prompt
of --prompt tokens and prints tokens/s per mode beside `archi plan`'s estimate. Run it on
a GPU machine; keep its output, the date and the GPU beside this script. Without CUDA it
says so in one line and exits 2. Not run by the tests.

    python -m benchmarks.gpu_decode [--models gpt2-345m,llama2-7b] [--prompt 64] [--new 64]
"""

import argparse
import sys
import time


def _timed(run, repeats: int = 3) -> float:
    """The best of `repeats` runs after one warm-up, in seconds (CUDA synchronized)."""
    import torch

    run()
    best = float("inf")
    for _ in range(repeats):
        torch.cuda.synchronize()
        start = time.perf_counter()
        run()
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return best


def _model(name: str):
    import torch
    import transformers

    from archipelago.models.zoo import zoo_model

    fields = dict(zoo_model(name).hf_config)
    config = transformers.AutoConfig.for_model(fields.pop("model_type"), **fields)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = transformers.AutoModelForCausalLM.from_config(config, torch_dtype=torch.float16)
    return model.eval()


def measure(name: str, prompt: int, new: int) -> dict[str, float | str]:
    """Decode tokens/s of `name` in both modes: (time(prompt + new) - time(prompt + 1))
    over the new - 1 decode steps, so the prefill cancels. A mode this transformers cannot
    run for the model gives its one-line reason instead."""
    import torch

    model = _model(name)
    ids = torch.randint(0, model.config.vocab_size, (1, prompt), device="cuda")

    def gen(tokens: int, **kw) -> None:
        with torch.inference_mode():
            model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=tokens,
                           min_new_tokens=tokens, do_sample=False, pad_token_id=0, **kw)

    rates: dict[str, float | str] = {}
    for mode, kw in (("eager", {}), ("graph", {"cache_implementation": "static"})):
        if mode == "graph":
            model.forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
        try:
            steps = _timed(lambda kw=kw: gen(new, **kw)) - _timed(lambda kw=kw: gen(1, **kw))
        except Exception as err:  # reported in one line; the other mode still runs
            rates[mode] = f"{type(err).__name__}: {(str(err).splitlines() or [''])[0][:60]}"
            continue
        rates[mode] = (new - 1) / steps
    return rates


def _predicted(name: str, gpu: str, prompt: int, new: int) -> dict[str, float]:
    from archipelago.api import plan_and_estimate

    out = {}
    for mode in ("eager", "graph"):
        est = plan_and_estimate(name, f"1x{gpu}", f"gpu-{mode}",
                                {"tokens": f"{prompt}:{new}"}).estimate
        out[mode] = 1 / est.decode_s_per_token
    return out


def _catalog_key(device_name: str) -> str | None:
    """The catalog GPU a CUDA device name is (e.g. 'NVIDIA H100 80GB HBM3' -> h100)."""
    for key in ("h200", "h100", "a100", "v100", "l4", "t4"):
        if key in device_name.lower():
            return key
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="gpt2-345m,gpt2-774m,gpt2-1.5b,llama2-7b")
    parser.add_argument("--prompt", type=int, default=64)
    parser.add_argument("--new", type=int, default=64)
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("gpu_decode: torch is not installed; nothing to measure", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("gpu_decode: no CUDA device on this machine; run it on a GPU machine",
              file=sys.stderr)
        return 2
    device = torch.cuda.get_device_name(0)
    key = _catalog_key(device)
    print(f"{time.strftime('%Y-%m-%d')} · {device} · torch {torch.__version__} · "
          f"prompt {args.prompt}, {args.new} new tokens, batch 1, FP16")
    print(f"{'model':<12} {'eager tok/s':>12} {'graph tok/s':>12} {'est eager':>10} "
          f"{'est graph':>10}")
    for name in args.models.split(","):
        got = measure(name, args.prompt, args.new)
        est = _predicted(name, key, args.prompt, args.new) if key else {}
        cells = [f"{v:>12,.1f}" if isinstance(v, float) else f"{'failed':>12}"
                 for v in (got["eager"], got["graph"])]
        print(f"{name:<12} {' '.join(cells)} {est.get('eager', float('nan')):>10,.1f} "
              f"{est.get('graph', float('nan')):>10,.1f}")
        for mode, v in got.items():
            if isinstance(v, str):
                print(f"  {mode}: {v}")
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())

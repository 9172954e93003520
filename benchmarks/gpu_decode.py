"""Measured generation on a CUDA GPU in the two modes the gpu kind estimates, each beside
`archi plan`'s estimate and the ratio (estimate / measured; below 1 the estimate is fast).

    eager  transformers' `generate` as a user runs it (DynamicCache, every op from Python)
    graph  a static KV cache and the forward compiled with torch.compile(mode=
           "reduce-overhead"), which replays one CUDA graph per decode step

For each model (a built-in name or a config.json path) and batch it loads seeded random
FP16 weights (tokens/s does not depend on them), generates greedily after a prompt and
times the prompt (one new token) and each further token: decode per token is
(time(prompt + new) - time(prompt + 1)) / (new - 1), so the prompt cancels. Run it on a GPU
machine as one prepared command; keep its output, the date and the GPU beside this script.
Without CUDA it says so in one line and exits 2. No test depends on a GPU.

    python -m benchmarks.gpu_decode [--models gpt2-345m,llama2-7b,cfg/config.json]
        [--tokens 64:64] [--batches 1,8,64] [--modes eager,graph]
"""

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from archipelago.errors import ArchipelagoError
from archipelago.estimate.workload import parse_tokens

MODES = ("eager", "graph")
GPU_KEYS = ("h200", "h100", "a100", "v100", "l4", "t4")  # the catalog's, most specific first


def catalog_key(device_name: str) -> str | None:
    """The catalog GPU a CUDA device name is (e.g. 'NVIDIA H100 80GB HBM3' -> h100)."""
    return next((key for key in GPU_KEYS if key in device_name.lower()), None)


def parse_batches(text: str) -> list[int]:
    """`1,8,64`: whole numbers in 1..64 (ValueError with a one-line message otherwise)."""
    if not all(b.strip().isdigit() and 1 <= int(b) <= 64 for b in text.split(",")):
        raise ValueError(f"--batches '{text[:40]}': whole numbers in 1..64, e.g. 1,8,64")
    return [int(b) for b in text.split(",")]


def _config(name: str) -> Any:
    import transformers

    if Path(name).is_file():
        return transformers.AutoConfig.from_pretrained(name)
    from archipelago.models.zoo import zoo_model

    fields = dict(zoo_model(name).hf_config)
    return transformers.AutoConfig.for_model(fields.pop("model_type"), **fields)


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


def measure(model: Any, mode: str, prompt: int, new: int, batch: int) -> tuple[float, float]:
    """(prompt seconds, decode seconds per token) of one mode."""
    import torch

    ids = torch.randint(0, model.config.vocab_size, (batch, prompt), device="cuda")
    kw = {"cache_implementation": "static"} if mode == "graph" else {}

    def gen(tokens: int) -> None:
        with torch.inference_mode():
            model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=tokens,
                           min_new_tokens=tokens, do_sample=False, pad_token_id=0, **kw)

    first = _timed(lambda: gen(1))
    return first, (_timed(lambda: gen(new)) - first) / max(new - 1, 1)


def estimated(name: str, gpu: str, tokens: str, batch: int) -> dict[str, tuple[float, float]]:
    from archipelago.api import plan_and_estimate

    out = {}
    for mode in MODES:
        est = plan_and_estimate(name, f"1x{gpu}", f"gpu-{mode}",
                                {"tokens": tokens, "batch": str(batch)}).estimate
        out[mode] = (est.prefill_s, est.decode_s_per_token)
    return out


def _row(name: str, mode: str, batch: int, got: tuple[float, float],
         est: tuple[float, float] | None) -> str:
    cells = [f"{name[:24]:<24} {mode:<6} {batch:>5}"]
    for i in (0, 1):
        guess = f"{est[i] * 1e3:>10.3f} {est[i] / got[i]:>6.2f}" if est else f"{'-':>17}"
        cells.append(f"{got[i] * 1e3:>10.3f} {guess}")
    return " ".join(cells)


def run(models: list[str], tokens: str, batches: list[int], modes: list[str]) -> None:
    import torch
    import transformers

    work = parse_tokens(tokens)
    device = torch.cuda.get_device_name(0)
    key = catalog_key(device)
    print(f"{time.strftime('%Y-%m-%d')} · {device} (catalog {key}) · torch {torch.__version__}"
          f" · transformers {transformers.__version__} · tokens {tokens} · FP16")
    print(f"{'model':<24} {'mode':<6} {'batch':>5} {'prompt ms':>10} {'est':>10} {'ratio':>6}"
          f" {'token ms':>10} {'est':>10} {'ratio':>6}")
    for name in models:
        torch.manual_seed(0)
        with torch.device("cuda"):
            model = transformers.AutoModelForCausalLM.from_config(
                _config(name), torch_dtype=torch.float16).eval()
        for mode in modes:
            if mode == "graph":
                model.forward = torch.compile(model.forward, mode="reduce-overhead")
            for batch in batches:
                try:
                    got = measure(model, mode, work.input_tokens, work.output_tokens, batch)
                except Exception as err:  # one line; the other cases still run
                    print(f"{name[:24]:<24} {mode:<6} {batch:>5} failed: {type(err).__name__}: "
                          f"{(str(err).splitlines() or [''])[0][:60]}")
                    continue
                est = estimated(name, key, tokens, batch)[mode] if key else None
                print(_row(name, mode, batch, got, est), flush=True)
        del model
        torch.cuda.empty_cache()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="gpt2-345m,gpt2-1.5b,llama2-7b")
    parser.add_argument("--tokens", default="64:64")
    parser.add_argument("--batches", default="1,8,64")
    parser.add_argument("--modes", default="eager,graph")
    args = parser.parse_args(argv)
    modes = args.modes.split(",")
    try:
        batches = parse_batches(args.batches)
        parse_tokens(args.tokens)
        if not set(modes) <= set(MODES):
            raise ValueError(f"--modes '{args.modes[:40]}': choose from {', '.join(MODES)}")
    except (ValueError, ArchipelagoError) as err:
        print(f"gpu_decode: {err}", file=sys.stderr)
        return 2
    try:
        import torch
    except ImportError:
        print("gpu_decode: torch is not installed; nothing to measure", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("gpu_decode: no CUDA device on this machine; run it on a GPU machine",
              file=sys.stderr)
        return 2
    run(args.models.split(","), args.tokens, batches, modes)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The unsplit transformers model: seeded random weights saved as a checkpoint, and the
greedy reference the emulated ranks are checked against. The only module here that imports
transformers; ranks never load it."""

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig, PreTrainedModel

from archipelago.emulate import cache
from archipelago.models.spec import ModelSpec


@contextmanager
def _quiet() -> Iterator[None]:
    """No progress bars or config warnings (a tiny test vocab lacks GPT-2's eos id)."""
    logging = transformers.utils.logging
    level, bars = logging.get_verbosity(), logging.is_progress_bar_enabled()
    logging.set_verbosity_error()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        logging.set_verbosity(level)
        if bars:
            logging.enable_progress_bar()


@contextmanager
def half_the_cores() -> Iterator[None]:
    """torch's intra-op threads at half this machine's cores (at least one) meanwhile. The
    launcher's check runs where other jobs may hold cores: each op's parallel region waits
    for its slowest thread, spinning while another job has that thread's core (gpt2-345m's
    one 15-token forward pass took 9-11 s on 2 threads against 1.2-1.4 s on 1, on 2 cores
    at load 10, 2026-11-28); on a quiet machine one pass costs little either way."""
    previous = torch.get_num_threads()
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // 2))
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def seeded_model(spec: ModelSpec, seed: int) -> PreTrainedModel:
    """transformers' own random initialization of the spec's config, after manual_seed(seed)
    (the caller's random state is left as it was)."""
    config = dict(spec.hf_config)
    with _quiet(), torch.random.fork_rng(devices=[]):
        hf_config = AutoConfig.for_model(config.pop("model_type"), **config)
        torch.manual_seed(seed)
        return AutoModelForCausalLM.from_config(hf_config).eval()


def save_model(model: PreTrainedModel, directory: Path) -> Path:
    with _quiet():
        model.save_pretrained(directory)
    return directory


def save_seeded_checkpoint(spec: ModelSpec, seed: int, directory: Path) -> Path:
    return save_model(seeded_model(spec, seed), directory)


def cached_directory(kind: str, key: object, make: Callable[[Path], Path]) -> Path:
    """A directory made once per machine by `make` and reused across runs (the seeded-weights
    cache, archipelago/emulate/cache.py): ranks started by torchrun (maybe on several
    machines) each need one beside them. The library versions are part of the key, since
    they make the files."""
    return cache.cached_directory(kind, [key, torch.__version__, transformers.__version__],
                                  make)


def cached_seeded_checkpoint(spec: ModelSpec, seed: int) -> Path:
    return cached_directory("seeded", [spec.hf_config, seed],
                            lambda d: save_seeded_checkpoint(spec, seed, d))


def load_model(directory: Path) -> PreTrainedModel:
    """The fp32 reference model from a local checkpoint directory (nothing is downloaded)."""
    with _quiet():
        return AutoModelForCausalLM.from_pretrained(
            directory, dtype=torch.float32, local_files_only=True).eval()


def greedy_generate(model: PreTrainedModel, prompt: torch.Tensor, new_tokens: int) -> list[int]:
    """transformers' greedy generate(), exactly `new_tokens` long (no stop token).
    generate() fills a passed config's unset fields from the model's own generation config,
    so the model's eos_token_id is cleared there: otherwise min_new_tokens would forbid that
    token (a tiny vocabulary's argmax may be it)."""
    model.generation_config.eos_token_id = None
    config = GenerationConfig(do_sample=False, max_new_tokens=new_tokens,
                              min_new_tokens=new_tokens, eos_token_id=None, pad_token_id=0,
                              bos_token_id=None)
    ids = prompt[None, :]
    with _quiet(), torch.inference_mode():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=config)
    return out[0, len(prompt):].tolist()


def greedy_while(model: PreTrainedModel, prompt: torch.Tensor, new_tokens: int,
                 go: Callable[[], bool]) -> tuple[list[int], torch.Tensor] | None:
    """Greedy decoding as generate() does it (each token the argmax of the model's logits,
    the attention cache carried), one step at a time while `go()` says so: the tokens and
    the logits at each step, or None once it says stop."""
    tokens: list[int] = []
    rows: list[torch.Tensor] = []
    ids, cache = prompt[None, :], None
    with torch.inference_mode():
        for _ in range(new_tokens):
            if not go():
                return None
            out = model(ids, cache=cache, use_cache=True, logits_to_keep=1)
            cache, row = out.cache, out.logits[0, -1:].float()
            rows.append(row)
            tokens.append(int(row.argmax()))
            ids = torch.tensor([tokens[-1:]], dtype=prompt.dtype)
    return tokens, torch.cat(rows)


def logits_along(model: PreTrainedModel, prompt: torch.Tensor, fed: list[int]) -> torch.Tensor:
    """Reference logits at each generation step when fed the emulator's own tokens (`fed`:
    all but the last generated), so the comparison stays meaningful even after the two
    token paths part."""
    ids = torch.cat((prompt, torch.tensor(fed, dtype=prompt.dtype)))[None, :]
    with torch.inference_mode():
        logits = model(ids).logits[0]
    return logits[len(prompt) - 1:].float()

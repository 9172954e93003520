"""The reference the Galapagos emulation is checked against: transformers' IBertModel in
quant_mode, built from the spec's config with seeded random weights and calibrated by one
forward in train() mode (a fresh model's activation ranges are empty until then)."""

from dataclasses import dataclass

import torch
import transformers
from transformers import IBertConfig, IBertModel

from archipelago.errors import ArchipelagoError
from archipelago.models.spec import ModelSpec


@dataclass(frozen=True)
class Reference:
    model: IBertModel
    tokens: torch.Tensor  # (1, M) input ids
    embedded: torch.Tensor  # int8 rows the embedding FPGAs send (1, M, H), as floats
    embed_scale: torch.Tensor
    output: torch.Tensor  # last_hidden_state (1, M, H)


def ibert_config(spec: ModelSpec) -> IBertConfig:
    config = dict(spec.hf_config)
    if config.pop("model_type", None) != "ibert" or not config.get("quant_mode"):
        raise ArchipelagoError(
            f"galapagos emulation runs I-BERT's integer kernels; {spec.name} is not an I-BERT "
            "model in quant_mode (model_type 'ibert', quant_mode: true)")
    return IBertConfig(**config)


def reference(spec: ModelSpec, seq_len: int, seed: int) -> Reference:
    """Seeded weights, one calibrating train() forward on other tokens, then the eval
    forward whose encoder output the emulation must reproduce bit for bit."""
    config = ibert_config(spec)
    level = transformers.utils.logging.get_verbosity()
    transformers.utils.logging.set_verbosity_error()  # LayerNorm shift messages
    try:
        torch.manual_seed(seed)
        model = IBertModel(config, add_pooling_layer=False)
        low = config.pad_token_id + 1
        calibration = torch.randint(low, config.vocab_size, (1, seq_len))
        tokens = torch.randint(low, config.vocab_size, (1, seq_len))
        with torch.no_grad():
            model.train()
            model(calibration)
            model.eval()
            output = model(tokens).last_hidden_state
            embedded, scale = model.embeddings(input_ids=tokens)
    finally:
        transformers.utils.logging.set_verbosity(level)
    return Reference(model, tokens, torch.round(embedded / scale), scale, output)

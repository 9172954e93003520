"""Shared fixtures: tiny configs small enough to build real transformers models quickly."""

import pytest

TINY_GPT2 = {"model_type": "gpt2", "n_embd": 64, "n_head": 4, "n_layer": 2, "vocab_size": 97,
             "n_positions": 64, "activation_function": "gelu_new"}


@pytest.fixture
def tiny_gpt2_config() -> dict:
    return dict(TINY_GPT2)

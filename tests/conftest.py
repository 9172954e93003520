"""Shared fixtures: tiny configs small enough to build real transformers models quickly."""

import pytest

TINY_GPT2 = {"model_type": "gpt2", "n_embd": 64, "n_head": 4, "n_layer": 2, "vocab_size": 97,
             "n_positions": 64, "activation_function": "gelu_new"}


@pytest.fixture
def tiny_gpt2_config() -> dict:
    return dict(TINY_GPT2)


@pytest.fixture(autouse=True, scope="session")
def _cache_in_a_temporary_directory(tmp_path_factory: pytest.TempPathFactory) -> None:
    """What reading a config file caches (models/hf_meta.py) goes to a directory of this
    run, never the user's cache; tests that check the cache set their own. Its stores'
    folders are made here, so no test's output holds their first-use notice
    (cache_dir.cache_folder) but the tests of that notice, which set their own."""
    import os

    from archipelago.cache_dir import DIR_ENV

    root = tmp_path_factory.mktemp("archipelago-cache")
    for store in ("compare", "explore"):
        (root / store).mkdir()
    os.environ[DIR_ENV] = str(root)


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium per worker for every browser test (tests/browser.py): each test
    opens its pages afresh in it; a browser started and closed per test cost 3 s each."""
    from tests.browser import Chromium, find_chromium

    with Chromium(find_chromium()) as browser:
        yield browser


@pytest.fixture(scope="session")
def onnx_network(tmp_path_factory: pytest.TempPathFactory):
    """`onnx_network(name, dynamo, fold=True, opset=None)`: tests/onnx_networks.py's export,
    made once per run and shared by the tests (and xdist workers) that read it."""
    from tests.export_cache import onnx_networks

    return onnx_networks(tmp_path_factory)


@pytest.fixture(scope="module")
def gpt2_config(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The emulation tests' GPT-2 (tests/test_emulate.GPT2) as a config file, once a module."""
    from tests.test_emulate import GPT2, write_config

    return write_config(tmp_path_factory.mktemp("tiny-gpt2"), GPT2)


@pytest.fixture(scope="module")
def gpt2_reference():
    """That GPT-2 built by transformers with the emulation tests' seeded weights."""
    from tests.test_emulate import GPT2, SEED, hf_model

    return hf_model(GPT2, SEED)

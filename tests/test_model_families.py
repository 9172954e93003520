"""Model families: a family registered from this module alone is listed by `archi catalog`
and planned by `archi plan` (adding a model family edits no other file), every built-in
family's names resolve, and the families' order is the old resolver's precedence."""

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import transformers
from typer.testing import CliRunner

from archipelago.cli import app
from archipelago.errors import MESSAGE_LIMIT, ConfigError, UnknownNameError
from archipelago.families import (
    CatalogTable,
    Family,
    families,
    register_family,
    resolve,
    unregister_family,
)
from archipelago.models.dag import ModelDAG
from archipelago.models.dag_zoo import builtin_dag
from archipelago.models.hf_config import spec_from_hf_config
from archipelago.models.recurrent import RecurrentSpec, build_recurrent
from archipelago.models.spec import ModelSpec
from archipelago.models.weights import parameter_count
from archipelago.models.zoo import resolve_model, zoo_configs

TOY = re.compile(r"toy-gpt-L(\d+)-H(\d+)")
TOY_NAMES = ("toy-gpt-L2-H64", "toy-gpt-L4-H128")


def toy_config(name: str) -> dict:
    """A GPT-2 config.json of `name`'s depth and width (four heads, so two devices split it)."""
    match = TOY.fullmatch(name)
    assert match
    layers, hidden = map(int, match.groups())
    return {"model_type": "gpt2", "n_layer": layers, "n_embd": hidden, "n_head": 4,
            "vocab_size": 97, "n_positions": 256}


def load_toy(name: str) -> ModelSpec:
    return spec_from_hf_config(toy_config(name), name=name, source="toy family")


def toy_catalog() -> CatalogTable:
    specs = {name: load_toy(name) for name in TOY_NAMES}
    return CatalogTable("toy_models", "toy GPT-2s (toy-gpt-L<layers>-H<hidden>)",
                        ("name", "layers", "hidden", "parameters"),
                        {n: (s.layers, s.hidden, parameter_count(s)) for n, s in specs.items()})


@pytest.fixture
def toy_family() -> Iterator[Family]:
    family = register_family(Family("toy-gpt", "model", matches=lambda t: bool(TOY.fullmatch(t)),
                                    load=load_toy, choices=lambda: ["toy-gpt-L<n>-H<n>"],
                                    catalog=toy_catalog))
    yield family
    unregister_family("toy-gpt")


def archi(*args: str) -> str:
    out = CliRunner().invoke(app, list(args))
    assert out.exit_code == 0, out.output
    return out.output


def transformers_parameters(config: dict) -> int:
    """GPT2LMHeadModel built from `config` on the meta device (no memory, no download)."""
    conf = transformers.GPT2Config(**{k: v for k, v in config.items() if k != "model_type"})
    with torch.device("meta"):
        model = transformers.GPT2LMHeadModel(conf)
    return sum(p.numel() for p in model.parameters())


def test_catalog_lists_the_registered_family(toy_family: Family) -> None:
    data = json.loads(archi("catalog", "--json"))
    assert data["toy_models"] == {
        name: {"layers": c["n_layer"], "hidden": c["n_embd"],
               "parameters": transformers_parameters(c)}
        for name, c in ((n, toy_config(n)) for n in TOY_NAMES)}
    assert {"models", "recurrent_models", "dag_models", "devices", "strategies"} <= set(data)
    table = archi("catalog")
    assert "toy GPT-2s" in table and "toy-gpt-L4-H128" in table
    assert table.index("layer-DAG models") < table.index("toy GPT-2s") < table.index("devices")


def test_plan_plans_the_registered_family_as_its_config_json(toy_family: Family,
                                                            tmp_path: Path) -> None:
    """The toy name and the same config.json read through the config.json family give the
    same plan, figure for figure; the file's also shows its parameter count, which the toy
    family (no catalog count) does not."""
    name = "toy-gpt-L2-H64"
    path = tmp_path / name / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(toy_config(name)))
    args = ("--cluster", "2xu280", "--strategy", "dfx", "--json")
    by_name = json.loads(archi("plan", name, *args))
    by_file = json.loads(archi("plan", str(path), *args))
    assert by_file.pop("parameters") == transformers_parameters(toy_config(name))
    assert by_name == by_file
    assert by_name["model"] == name and len(by_name["devices"]) == 2
    assert by_name["latency_s"] > 0


def test_an_unregistered_family_is_gone(toy_family: Family) -> None:
    assert resolve_model("toy-gpt-L2-H64").layers == 2
    unregister_family("toy-gpt")
    with pytest.raises(UnknownNameError, match="unknown model 'toy-gpt-L2-H64'"):
        resolve_model("toy-gpt-L2-H64")
    assert "toy_models" not in json.loads(archi("catalog", "--json"))


# Each built-in family's names and what the old resolver built for each.
BUILT_IN = {
    "transformer-zoo": (sorted(zoo_configs()), ModelSpec,
                        lambda n: spec_from_hf_config(zoo_configs()[n], name=n, source="zoo")),
    "recurrent": (["lstm", "matvec", "nmt-li", "nmt-luong"], RecurrentSpec, build_recurrent),
    "layer-dag": (["vlocnet", "casua-surf", "vfs", "facebag", "cnn-lstm"], ModelDAG,
                  builtin_dag),
}


@pytest.mark.parametrize("family", sorted(BUILT_IN))
def test_every_built_in_name_resolves_by_its_own_family_only(
        family: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Built-in names are disjoint and look like no file, so the order among the name
    families is immaterial and each name is its family's."""
    monkeypatch.chdir(tmp_path)  # no stray file shadows a name
    names, kind, build = BUILT_IN[family]
    registered = {f.name: f for f in families("model")}
    assert sorted(c for c in registered[family].choices() if not c.startswith("<")) == sorted(names)
    for name in names:
        assert [f.name for f in registered.values() if f.matches(name)] == [family]
        model = resolve_model(name)
        assert isinstance(model, kind) and model == build(name)


def test_unknown_name_lists_every_family_s_choices() -> None:
    """The list the old resolver gave (sorted by UnknownNameError), with the torch.export
    family added since."""
    every = ["<layer-DAG YAML>", "<model.onnx>", "<model.pt2 from torch.export.save>",
             "<path to config.json>", "bert-base", "casua-surf", "cnn-lstm", "facebag",
             "gpt2-1.5b", "gpt2-345m", "gpt2-774m", "ibert-base", "llama2-7b", "lstm", "matvec",
             "nmt-li", "nmt-luong", "opt-6.7b", "vfs", "vlocnet"]
    for text in ("gpt5", "", "   "):  # an empty name is not the working directory
        with pytest.raises(UnknownNameError) as err:
            resolve("model", text)
        head = f"unknown model '{text}'; valid choices: "
        message = str(err.value)
        assert message.startswith(head) and len("error: " + message) <= MESSAGE_LIMIT
        # the first names in order, as many as the line holds, then how many are left out
        shown, _, more = message.removeprefix(head).partition(" ... (")
        kept = shown.split(", ")
        assert kept == every[:len(kept)] and len(kept) >= 12
        assert more == f"{len(every) - len(kept)} more; `archi catalog` lists them)"


def test_precedence_names_before_paths_and_suffixes_before_config_json(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    tiny = {"model_type": "gpt2", "n_embd": 48, "n_head": 6, "n_layer": 3, "vocab_size": 101,
            "n_positions": 40}
    for name in ("gpt2-345m", "lstm", "vfs"):  # a same-named checkpoint directory
        Path(name).mkdir()
        Path(name, "config.json").write_text(json.dumps(tiny))
    assert resolve_model("gpt2-345m").hidden == 1024  # the zoo's, not the directory's
    assert isinstance(resolve_model("lstm"), RecurrentSpec)
    assert isinstance(resolve_model("vfs"), ModelDAG)
    assert resolve_model("./gpt2-345m").hidden == 48  # a path is the directory
    # An existing YAML is a layer DAG, though config.json also takes any existing path.
    Path("two.yaml").write_text("layers:\n  - {name: fc1, type: fc, in_features: 8, "
                                "out_features: 4}\n")
    dag = resolve_model("two.yaml")
    assert isinstance(dag, ModelDAG) and dag.name == "two" and dag.compute_layers == 1
    with pytest.raises(ConfigError, match=r"^missing\.yml: field 'model': not found"):
        resolve_model("missing.yml")
    # A .json that does not exist is still a config.json, named in the error.
    with pytest.raises(ConfigError, match=r"^nothing/config\.json: field 'config\.json'"):
        resolve_model("nothing/config.json")


def test_an_onnx_path_is_onnx_even_when_it_exists(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("onnx")
    monkeypatch.chdir(tmp_path)
    Path("model.onnx").write_bytes(b"not onnx")
    with pytest.raises(ConfigError, match=r"^model\.onnx: field 'onnx'"):
        resolve_model("model.onnx")

"""A .pt2 someone sends must never run their code (issue 39, point 1): payload archives
(a pickle whose __reduce__ creates a marker file, hidden in the example inputs or in a
weight marked as pickled; Python in a symbolic size, in the guards, or an operator that is
`os.system`) go through every command that reads a model, and the marker never appears.
Unreadable archives are one line on stderr, with nothing torch logs ahead of it (point 2)."""

import contextlib
import io
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

torch = pytest.importorskip("torch")

from archipelago.cli import app  # noqa: E402
from archipelago.errors import ConfigError  # noqa: E402
from archipelago.families import resolve  # noqa: E402
from archipelago.library_logs import kept_library_logs  # noqa: E402


class Payload:
    """Unpickling this creates `marker`: what an attacker's pickle would do."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):
        return torch.relu(self.fc(x))


def saved(path: Path) -> Path:
    torch.export.save(torch.export.export(Net(), (torch.randn(1, 8),)), str(path))
    return path


def rewritten(source: Path, target: Path, change) -> Path:
    """`source` with its entries (named without the root folder) passed through
    `change(name, data) -> data`, None dropping the entry."""
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w") as new:
        for info in old.infolist():
            name = info.filename.split("/", 1)[1]
            data = change(name, old.read(info))
            if data is not None:
                new.writestr(f"{target.stem}/{name}", data)
    return target


def pickled(obj) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def with_json(name: str, edit):
    def change(entry: str, data: bytes) -> bytes:
        return json.dumps(edit(json.loads(data))).encode() if entry == name else data
    return change


def pickled_weight(marker: Path):
    def change(entry: str, data: bytes) -> bytes:
        if entry == "data/weights/model_weights_config.json":
            config = json.loads(data)
            config["config"]["fc.weight"]["use_pickle"] = True
            return json.dumps(config).encode()
        return pickled(Payload(marker)) if entry == "data/weights/weight_0" else data
    return change


def first_node(program: dict) -> dict:
    return program["graph_module"]["graph"]["nodes"][0]


def with_expression(marker: Path):
    def edit(program: dict) -> dict:
        first_node(program)["outputs"].append({"as_sym_int": {"as_expr": {
            "expr_str": f"__import__('builtins').open('{marker}', 'w')", "hint": None}}})
        return program
    return with_json("models/model.json", edit)


def with_operator(program: dict) -> dict:
    first_node(program)["target"] = "torch.os.system"
    return program


def with_argument_name(marker: Path):
    """torch.fx writes the forward's argument names into the source it generates and runs."""
    def edit(program: dict) -> dict:
        signature = program["graph_module"]["module_call_graph"][0]["signature"]
        signature["forward_arg_names"] = [f"x=__import__('builtins').open('{marker}', 'w')"]
        return program
    return with_json("models/model.json", edit)


PAYLOADS = {  # how the payload is hidden -> (the archive's change, the entry refused)
    "example inputs": (lambda m: lambda e, d: pickled((Payload(m),)) if e.startswith(
        "data/sample_inputs/") else d, "data/sample_inputs/model.pt"),
    "pickled weight": (pickled_weight, "data/weights/weight_0"),
    "symbolic size": (with_expression, "models/model.json"),
    "operator": (lambda m: with_json("models/model.json", with_operator),
                 "models/model.json"),
    "argument name": (with_argument_name, "models/model.json"),
}


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> Path:
    return saved(tmp_path_factory.mktemp("pt2") / "net.pt2")


@pytest.mark.parametrize("kind", list(PAYLOADS))
def test_a_payload_is_refused_naming_its_entry(kind: str, good: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    change, entry = PAYLOADS[kind]
    path = rewritten(good, tmp_path / "evil.pt2", change(marker))
    with pytest.raises(ConfigError, match=rf"evil\.pt2: field '{entry}'"):
        resolve("model", str(path))
    assert not marker.exists()


@pytest.mark.filterwarnings("ignore")
def test_the_payloads_are_live_in_torchs_own_loader(good: Path, tmp_path: Path) -> None:
    """Not a vacuous test: torch.export.load runs the pickles the tests above hide."""
    for kind in ("example inputs", "pickled weight"):
        marker = tmp_path / kind.replace(" ", "-")
        path = rewritten(good, tmp_path / "evil.pt2", PAYLOADS[kind][0](marker))
        with contextlib.suppress(Exception), kept_library_logs("torch"):
            torch.export.load(str(path))  # the payload has run; what follows is moot
        assert marker.exists(), kind


def test_guards_are_dropped_not_run(good: Path, tmp_path: Path) -> None:
    """The program's guards are Python source torch would exec: dropped, the rest plans."""
    marker = tmp_path / "ran"
    edit = with_json("models/model.json", lambda p: {**p, "guards_code": [
        f"__import__('builtins').open('{marker}', 'w')"]})
    path = rewritten(good, tmp_path / "guarded.pt2", edit)
    assert resolve("model", str(path)).layers[0].name == "fc"
    assert not marker.exists()


def archi(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "archipelago", *args], capture_output=True,
                          text=True, timeout=300, cwd=cwd)


# Every command that reads a model file, with what it needs besides.
COMMANDS = {
    "plan": (), "report": ("--out", "r.html"), "emulate": (), "build": ("--out", "b"),
    "explore": ("--trials", "1", "--storage", "s"),
    "compare": ("--tokens", "8:8", "--store", "c.jsonl"),
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_no_command_runs_a_payload(command: str, good: Path, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """In this process (the commands' code is what is checked; a fresh process's logs are
    the unreadable archives' test below): the payload would create the marker here too."""
    marker = tmp_path / "ran"
    rewritten(good, tmp_path / "evil.pt2", PAYLOADS["example inputs"][0](marker))
    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(app, [command, "evil.pt2", *COMMANDS[command]])
    assert out.exit_code == 2, out.output
    assert out.stderr.count("\n") == 1 and "field 'data/sample_inputs/model.pt'" in out.stderr
    assert not marker.exists()


def truncated(data: bytes) -> bytes:
    return data[: len(data) // 2]


def junk_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("x/junk", b"\x00" * 64)
    return buffer.getvalue()


BROKEN = {  # an unreadable archive -> what the one line names
    "truncated": (lambda good: truncated(good.read_bytes()), "field 'pt2'"),
    "empty": (lambda good: b"", "field 'pt2'"),
    "text": (lambda good: b"def forward(x): return x\n", "field 'pt2'"),
    "zip of junk": (lambda good: junk_zip(), "field 'archive_version'"),
}


@pytest.mark.parametrize("kind", [*BROKEN, "missing entry", "short weight"])
def test_an_unreadable_archive_is_one_line(kind: str, good: Path, tmp_path: Path) -> None:
    path = tmp_path / "bad.pt2"
    if kind == "missing entry":
        rewritten(good, path, lambda e, d: None if e.endswith("weights_config.json") else d)
        named = "field 'data/weights/model_weights_config.json': missing"
    elif kind == "short weight":
        rewritten(good, path, lambda e, d: d[:8] if e == "data/weights/weight_0" else d)
        named = "field 'data/weights/weight_0': holds 8 bytes"
    else:
        path.write_bytes(BROKEN[kind][0](good))
        named = BROKEN[kind][1]
    out = archi("plan", "bad.pt2", cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.startswith("error: bad.pt2: ") and out.stderr.count("\n") == 1, \
        out.stderr
    assert named in out.stderr


def weights_config(edit):
    return with_json("data/weights/model_weights_config.json", edit)


def expanded(config: dict) -> dict:
    meta = config["config"]["fc.weight"]["tensor_meta"]
    meta["sizes"] = [{"as_int": 2**40}, {"as_int": 8}]
    meta["strides"] = [{"as_int": 0}, {"as_int": 1}]
    return config


def custom_object(program: dict) -> dict:
    return {"config": {"obj": {"path_name": "custom_obj_0", "is_param": False,
                               "use_pickle": True, "tensor_meta": None}}}


@pytest.mark.parametrize(("change", "named"), [
    (weights_config(expanded), "field 'data/weights/weight_0': holds 128 bytes"),
    (with_json("data/constants/model_constants_config.json", custom_object),
     "field 'data/constants/custom_obj_0': is a pickled object"),
    (lambda e, d: b"not a torch.save file" if e.startswith("data/sample_inputs/") else d,
     "field 'data/sample_inputs/model.pt': not example inputs saved by torch"),
])
def test_what_torch_would_compute_with_or_unpickle_is_refused(change, named: str, good: Path,
                                                               tmp_path: Path) -> None:
    path = rewritten(good, tmp_path / "odd.pt2", change)
    with pytest.raises(ConfigError, match=re.escape(named)):
        resolve("model", str(path))


def listed_expression(marker: Path):
    """sympify evaluates every text of a list too: a size given as a list of Python."""
    def edit(program: dict) -> dict:
        first_node(program)["outputs"].append({"as_sym_int": {"as_expr": {
            "expr_str": [f"__import__('builtins').open('{marker}', 'w')"], "hint": None}}})
        return program
    return with_json("models/model.json", edit)


def test_a_size_that_is_not_a_text_is_refused(good: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    path = rewritten(good, tmp_path / "listed.pt2", listed_expression(marker))
    with pytest.raises(ConfigError, match=r"field 'models/model.json': symbolic size \["):
        resolve("model", str(path))
    assert not marker.exists()


class Scaled(torch.nn.Module):
    """A symbolic size in the saved program: the output is scaled by the batch size."""

    def forward(self, x):
        return x.reshape(-1) * x.shape[0]


def test_python_in_a_real_symbolic_size_runs_in_torch_and_is_refused_here(
        tmp_path: Path) -> None:
    batch = torch.export.Dim("batch", min=3, max=100)
    program = torch.export.export(Scaled(), (torch.randn(6, 4),),
                                  dynamic_shapes={"x": {0: batch}})
    torch.export.save(program, str(tmp_path / "scaled.pt2"))
    marker = tmp_path / "ran"
    payload = json.dumps(f"__import__('builtins').open('{marker}', 'w') and 3")

    def change(entry: str, data: bytes) -> bytes:
        if entry != "models/model.json":
            return data
        return re.sub(r'"expr_str": "[^"]*"', f'"expr_str": {payload}', data.decode()).encode()

    path = rewritten(tmp_path / "scaled.pt2", tmp_path / "evil.pt2", change)
    with pytest.raises(ConfigError, match=r"field 'models/model.json': symbolic size"):
        resolve("model", str(path))
    assert not marker.exists()
    with contextlib.suppress(Exception), kept_library_logs("torch"):
        torch.export.load(str(path))
    assert marker.exists()  # the payload is live: torch's own loader runs it

"""A sweep of bad inputs through `archi`, in-process: every refusal is exit status 2 and one
`error:` line of at most MESSAGE_LIMIT characters (issue 25, "Messages"), however long the
list of valid choices it names (hf_config's model types ran to 440 characters)."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from archipelago.cli import app
from archipelago.errors import MESSAGE_LIMIT, some_choices

RUNNER = CliRunner()
FILES = {
    "badtype.json": json.dumps({"model_type": "zzz", "hidden_size": 8}),
    "notype.json": json.dumps({"architectures": ["FooForCausalLM"], "hidden_size": 8}),
    "device.yaml": "name: c\nnodes: [{name: a, device: nosuch}]\n",
    "field.yaml": "name: c\nnodes: [{name: a, device: u280, wat: 1}]\n",
    "form.yaml": "wat: 1\n",
    "engine.yaml": "nosuchfield: 1\n",
    "dag.yaml": "name: d\nlayers: [{name: a, type: nosuch}]\n",
    "ips.yaml": "ips: [nosuch1, nosuch2]\n",
}
SWEEP = [
    ["plan", "gpt9"], ["plan", "x" * 5000], ["plan", "{badtype.json}"], ["plan", "{notype.json}"],
    ["plan", "gpt2-345m", "--cluster", "4xnosuch"], ["plan", "gpt2-345m", "--cluster", "zz"],
    ["plan", "gpt2-345m", "--cluster", "{device.yaml}"],
    ["plan", "gpt2-345m", "--cluster", "{field.yaml}"],
    ["plan", "gpt2-345m", "--cluster", "{form.yaml}"],
    ["plan", "gpt2-345m", "--engine-config", "{engine.yaml}"],
    ["plan", "gpt2-345m", "--strategy", "magic"], ["plan", "gpt2-345m", "--tokens", "x"],
    ["plan", "{dag.yaml}", "--strategy", "chef"],
    ["plan", "vfs", "--strategy", "chef", "--engine-config", "{ips.yaml}"],
    ["plan", "vfs", "--strategy", "dfx"], ["plan", "gpt2-345m", "--nosuch", "1"],
    ["plan", "lstm", "--strategy", "persistent", "--cluster", "4xu280"],
    ["emulate", "gpt9"], ["build", "gpt9", "--out", "x"], ["report", "gpt9", "--out", "x.html"],
    ["explore", "gpt2-345m", "--strategy", "magic"], ["proxies", "nosuch"], ["nosuchcmd"],
    ["compare", "gpt2-345m", "--tokens", "8:8", "--devices", "nosuch"],
    ["compare", "gpt2-345m", "--tokens", "8:8", "--sort", "zz"],
    ["compare", "gpt2-345m", "--tokens", "8:8", "--engine", "x" * 5000],
    ["plan", "gpt2-345m", "--engine", "\x00best"],
    ["plan", "gpt2-345m", "--engine", "best", "--engine-config", "{engine.yaml}"],
    ["plan", "gpt2-345m", "--cluster", "1xh100", "--strategy", "gpu-graph", "--engine", "best"],
    # a NUL byte names no file: os.stat's ValueError escaped (found by make fuzz's cli kind)
    ["plan", "lstm", "--cluster", "\x00|axvck190", "--strategy", "persistent"],
    ["plan", "\x00model"],
]


@pytest.mark.parametrize("args", SWEEP, ids=lambda a: " ".join(a)[:60])
def test_every_refusal_is_one_short_line(args, tmp_path: Path) -> None:
    for name, text in FILES.items():
        (tmp_path / name).write_text(text)
    words = [str(tmp_path / a[1:-1]) if a.startswith("{") else a for a in args]
    result = RUNNER.invoke(app, words)
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and len(lines[0]) <= MESSAGE_LIMIT, lines[0]


def test_some_choices_keeps_whole_names_and_counts_the_rest() -> None:
    names = [f"name{i:02d}" for i in range(30)]  # 6 characters each
    # 4 names (4 x 6 + 3 x 2 = 30) and " ... (26 more)" (14) fit 44; a fifth would not
    assert some_choices(names, 44) == "name00, name01, name02, name03 ... (26 more)"
    assert some_choices(names[:3], 44) == "name00, name01, name02"
    assert some_choices(names, 60, "archi catalog") == \
        "name00, name01 ... (28 more; `archi catalog` lists them)"

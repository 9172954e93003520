"""Third-party logging is captured at the CLI's edge (issue 39 point 2): a library that logs
a traceback or warns about a bad input on the way to the user's error prints nothing ahead
of the one `error:` line. Each case runs a real library call on a bad input inside the
edge (cli_group.user_errors) in a fresh process; the same run with
ARCHIPELAGO_LIBRARY_LOGS=show proves the library did print something there."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

TRIGGERS = {
    # torch's C++ warns that a tensor was given where data was expected
    "torch": "import torch; torch.tensor(torch.tensor([1.0]))",
    # transformers logs that a llama config.json is read as GPT-2
    "transformers": (
        "import json, pathlib, tempfile, transformers\n"
        "d = pathlib.Path(tempfile.mkdtemp()); (d / 'config.json').write_text(json.dumps("
        "{'model_type': 'llama'}))\n"
        "transformers.GPT2Config.from_pretrained(str(d))"),
    # onnx warns about a tensor whose external data names an unknown key
    "onnx": (
        "import onnx\nfrom onnx.external_data_helper import ExternalDataInfo\n"
        "t = onnx.TensorProto(name='w', data_location=onnx.TensorProto.EXTERNAL)\n"
        "for k, v in (('bogus', '1'), ('location', 'w.bin')):\n"
        "    e = t.external_data.add(); e.key, e.value = k, v\n"
        "ExternalDataInfo(t)"),
    # onnxruntime warns about a provider it does not have
    "onnxruntime": (
        "import contextlib, onnxruntime\nfrom onnx import TensorProto, helper\n"
        "v = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1]) for n in 'xy']\n"
        "g = helper.make_graph([helper.make_node('Identity', ['x'], ['y'])], 'g', v[:1], "
        "v[1:])\n"
        "m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 17)])\n"
        "m.ir_version = 8\n"
        "with contextlib.suppress(Exception):\n"
        "    onnxruntime.InferenceSession(m.SerializeToString(), providers=['NoSuch'])"),
    # Dask logs a whole traceback when a task's argument cannot be pickled
    "distributed": (
        "import contextlib, threading\nfrom distributed.protocol import pickle\n"
        "with contextlib.suppress(Exception):\n    pickle.dumps(threading.Lock())"),
}

SCRIPT = """
import sys, typer
from archipelago.cli_group import user_errors
from archipelago.errors import ArchipelagoError

def command():
    exec(sys.argv[1], {})
    raise ArchipelagoError("the input is bad")

try:
    user_errors(command)()
except typer.Exit as stop:
    sys.exit(stop.exit_code)
"""


def run(trigger: str, show: bool) -> subprocess.CompletedProcess:
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    env.pop("ARCHIPELAGO_LIBRARY_LOGS", None)
    if show:
        env["ARCHIPELAGO_LIBRARY_LOGS"] = "show"
    return subprocess.run([sys.executable, "-c", SCRIPT, trigger], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=300)


@pytest.mark.parametrize("library", list(TRIGGERS))
def test_a_library_log_or_warning_never_precedes_the_error_line(library) -> None:
    shown = run(TRIGGERS[library], show=True)
    assert shown.returncode == 2
    assert shown.stderr.strip() != "error: the input is bad", "the library printed nothing"
    kept = run(TRIGGERS[library], show=False)
    assert kept.returncode == 2 and kept.stderr == "error: the input is bad\n"

"""Third-party logging is captured at the CLI's edge (issue 39 point 2): a library that logs
a traceback or warns about a bad input on the way to the user's error prints nothing ahead
of the one `error:` line. Each case runs a real library call on a bad input inside the
edge (cli_group.user_errors) in a fresh process; the same call after it, in that process,
with ARCHIPELAGO_LIBRARY_LOGS=show proves the library did print something there."""

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

# Both runs in one fresh process, the kept one first: the library is imported and first
# used inside the edge exactly as in a process of its own, and the run after it, with
# ARCHIPELAGO_LIBRARY_LOGS=show, proves the same call prints there. One start-up and one
# import of the library instead of two (torch's and transformers' are seconds apiece).
SCRIPT = """
import os, sys, typer
from archipelago.cli_group import user_errors
from archipelago.errors import ArchipelagoError
from archipelago.library_logs import SHOW_ENV

def command():
    exec(sys.argv[1], {})
    raise ArchipelagoError("the input is bad")

def run():
    try:
        user_errors(command)()
    except typer.Exit as stop:
        return stop.exit_code

kept = run()
sys.stderr.write(sys.argv[2]); sys.stderr.flush()
os.environ[SHOW_ENV] = "show"
print(kept, run())
"""
MARK = "---- the same call with ARCHIPELAGO_LIBRARY_LOGS=show ----\n"


def run(trigger: str) -> tuple[tuple[int, int], str, str]:
    """(exit statuses, stderr) of the kept run and of the shown run after it."""
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    env.pop("ARCHIPELAGO_LIBRARY_LOGS", None)
    done = subprocess.run([sys.executable, "-c", SCRIPT, trigger, MARK], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=300)
    assert done.returncode == 0 and done.stderr.count(MARK) == 1, done.stderr
    kept, shown = done.stderr.split(MARK)
    codes = tuple(int(code) for code in done.stdout.splitlines()[-1].split())  # its last line
    return codes, kept, shown


@pytest.mark.parametrize("library", list(TRIGGERS))
def test_a_library_log_or_warning_never_precedes_the_error_line(library) -> None:
    codes, kept, shown = run(TRIGGERS[library])
    assert codes == (2, 2)
    assert shown.strip() != "error: the input is bad", "the library printed nothing"
    assert kept == "error: the input is bad\n"

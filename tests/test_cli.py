"""The `archi` command: JSON keys, tables, and one-line errors with exit status 2."""

import json
import subprocess
import sys

import pytest

from archipelago.strategies.registry import strategies
from tests.cli_here import archi_here


def archi(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "archipelago", *args],
                          capture_output=True, text=True, timeout=120)


def test_plan_json_has_the_documented_keys() -> None:
    out = archi("plan", "gpt2-1.5b", "--cluster", "4xu280", "--strategy", "dfx",
                "--tokens", "64:64", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    for key in ("latency_s", "tokens_per_s", "prefill_s", "decode_s_per_token", "breakdown_s",
                "devices", "feasible"):
        assert key in data
    assert len(data["devices"]) == 4
    assert {"dsp", "bram", "uram", "hbm_bytes"} <= set(data["devices"][0])


def test_plan_table_and_catalog() -> None:
    out = archi("plan", "gpt2-345m", "--cluster", "1xu280")
    assert out.returncode == 0 and "tokens/s" in out.stdout
    out = archi("catalog")
    assert out.returncode == 0
    for name in ("gpt2-1.5b", "u280", "dfx", "stratix10gx2800"):
        assert name in out.stdout


@pytest.mark.parametrize(("args", "message"), [
    (("plan", "gpt9"), "unknown model 'gpt9'; valid choices:"),
    (("plan", "gpt2-345m", "--cluster", "2xfoo"), "unknown device 'foo'"),
    (("plan", "gpt2-345m", "--strategy", "magic"),  # the registry's names, sorted
     f"unknown strategy 'magic'; valid choices: {min(strategies())}, "),
    (("plan", "gpt2-345m", "--cluster", "17xu280"), "17 devices exceed its 16 attention heads"),
    (("plan", "gpt2-345m", "--tokens", "64"), "must look like IN:OUT"),
    (("plan", "/proc/no-such-model/config.json"), "config.json: field 'config.json': not found"),
])
def test_bad_input_is_one_line_and_exit_2(args: tuple[str, ...], message: str) -> None:
    out = archi_here(*args)  # in this process: the refusal needs no fresh interpreter
    assert out.returncode == 2
    assert message in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr


@pytest.mark.parametrize(("engine", "message"), [
    ("d: 3", "dfx engine parameter 'd' = 3: must be a power of two"),
    ("l: 0", "dfx engine parameter 'l' = 0: Input should be greater than or equal to 1"),
    ("tile: 3", "unknown dfx engine parameter 'tile' (parameters: d, l, clock_hz"),
])
def test_engine_config_is_validated_even_under_python_O(tmp_path, engine: str,
                                                       message: str) -> None:
    """Validation is pydantic, not `assert`, so `python -O` refuses bad values too."""
    path = tmp_path / "engine.yaml"
    path.write_text(engine + "\n")
    out = subprocess.run([sys.executable, "-O", "-m", "archipelago", "plan", "gpt2-345m",
                          "--cluster", "1xu280", "--engine-config", str(path)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and message in out.stderr, out.stderr
    assert "Traceback" not in out.stderr

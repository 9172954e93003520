"""Hostile input to `archi emulate` and `archi proxies`: each ends in one `error:` line with
exit status 2 naming what was wrong, found before ranks start or measuring begins, and
leaves nothing behind."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from archipelago.cli import app
from tests.conftest import TINY_GPT2

RUNNER = CliRunner()


def one_error_line(args: list[str], **kwargs: object) -> str:
    result = RUNNER.invoke(app, args, **kwargs)
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert result.stdout == ""
    return lines[0]


@pytest.mark.parametrize(("args", "message"), [
    (["ibert-base", "--cluster", "72xsidewinder", "--strategy", "galapagos", "--seq-len", "0"],
     "--seq-len 0: must be in 1.."),
    (["gpt2-345m", "--cluster", "4xsidewinder", "--strategy", "galapagos"],
     "strategy 'galapagos' builds encoders"),
])
def test_refusals_come_before_the_emulator_imports_torch(args: list[str], message: str) -> None:
    code = ("import sys\nfrom archipelago.cli import app\n"
            f"code = app(['emulate', *{args!r}], standalone_mode=False)\n"
            "assert code == 2, code\n"
            "assert 'torch' not in sys.modules, 'torch imported before the refusal'\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert message in out.stderr


def test_a_non_finite_figure_in_an_emulation_report_is_a_bug_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from archipelago.emulate import tensor_parallel

    monkeypatch.setattr(tensor_parallel, "emulate",
                        lambda plan, job: {"max_abs_logit_diff": float("nan"), "ranks": 2})
    config = tmp_path / "tiny.json"
    config.write_text(json.dumps(TINY_GPT2))
    line = one_error_line(["emulate", str(config), "--cluster", "2xu280", "--tokens", "4:2",
                           "--json"])
    assert "max_abs_logit_diff is nan: a bug in the emulation" in line


def test_an_invalid_recurrent_size_is_one_config_line() -> None:
    line = one_error_line(["emulate", "nmt-luong", "--cluster", "2xs10-2800", "--strategy",
                           "persistent", "--steps", "2", "--hidden", "17"])
    assert line.startswith("error: model nmt-luong: field 'hidden': hidden 17 must be even")


@pytest.mark.parametrize(("content", "message"), [
    ('{"machine": "m", "calls": {"cpu_add": [[64, NaN]]}}',
     "field 'calls.cpu_add.0.1': Input should be a finite number"),
    (None, "field 'profile': is a FIFO (named pipe), not a regular file"),
])
def test_a_cpu_profile_is_read_at_the_edge_even_where_nothing_prices_calls(
        content: str | None, message: str, tmp_path: Path) -> None:
    import os

    profile = tmp_path / "profile.json"
    if content is None:
        os.mkfifo(profile)
    else:
        profile.write_text(content)
    line = one_error_line(["emulate", "nmt-luong", "--cluster", "2xs10-2800", "--strategy",
                           "persistent", "--steps", "2", "--cpu-profile", str(profile)])
    assert line.startswith(f"error: {profile}: {message}")


def test_a_checkpoint_that_is_not_safetensors_is_named_before_any_rank(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from archipelago.emulate import launch

    def no_ranks(*args: object) -> None:
        raise AssertionError("a rank process was about to start")

    monkeypatch.setattr(launch, "run_ranks", no_ranks)
    checkpoint = tmp_path / "ckpt"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text(json.dumps(TINY_GPT2))
    (checkpoint / "model.safetensors").write_bytes(b"\x20\x00\x00\x00\x00\x00\x00\x00{1: 2}")
    line = one_error_line(["emulate", str(checkpoint), "--cluster", "2xu280", "--tokens",
                           "4:2", "--checkpoint", str(checkpoint)])
    assert line.startswith(f"error: --checkpoint {checkpoint / 'model.safetensors'}: not a "
                           "readable safetensors file (SafetensorError: ")

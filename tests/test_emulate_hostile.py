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
from tests.signals import default_sigint, wait_until_caught

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
    from archipelago.strategies.tensor_parallel import emulate as emulator

    monkeypatch.setattr(emulator, "emulate",
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


def test_the_fork_servers_temporary_directory_is_announced_before_it_exists(
        tmp_path: Path) -> None:
    """A launcher SIGKILLed between starting the fork server and recording its helpers
    left multiprocessing's pymp-* directory behind: the reaper now hears of it before it
    exists. The server ignores SIGINT (a Ctrl-C reaches the whole
    process group; the launcher stops the run)."""
    code = f"""
import os, signal, tempfile
from multiprocessing import forkserver, util
from pathlib import Path
from archipelago.emulate import reaper

told = []
def tell(line):
    path = Path(line.removeprefix("also "))
    told.append((path, line.startswith("also ") and not path.exists()))
reaper._tell = tell
tempfile.tempdir = {str(tmp_path)!r}
reaper.start_fork_server(["json"])
made = Path(util.get_temp_dir())
assert made.parent == Path({str(tmp_path)!r}), made
assert (made, True) in told, told
assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
pid = forkserver._forkserver._forkserver_pid
assert "SigIgn" in open(f"/proc/{{pid}}/status").read()
ignored = int(open(f"/proc/{{pid}}/status").read().split("SigIgn:")[1].split()[0], 16)
assert ignored & (1 << (signal.SIGINT - 1)), hex(ignored)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, preexec_fn=default_sigint)
    assert out.returncode == 0, out.stderr


def test_proxies_stopped_by_a_signal_say_so_in_one_line(tmp_path: Path) -> None:
    import signal

    proc = subprocess.Popen([sys.executable, "-m", "archipelago", "proxies", "--out",
                             str(tmp_path / "p.json")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    wait_until_caught(proc, signal.SIGTERM)  # then measuring takes seconds more
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 143 and stderr == "error: interrupted by SIGTERM\n"
    assert not (tmp_path / "p.json").exists()


def _no_measuring(monkeypatch: pytest.MonkeyPatch) -> None:
    from archipelago.strategies.host_offload import proxies

    def measure(*args: object) -> None:
        raise AssertionError("measuring started before the target was checked")

    monkeypatch.setattr(proxies, "measure_profile", measure)


@pytest.mark.parametrize(("out", "message"), [
    ("FILE/p.json", "FILE is not a directory"),
    ("/proc/x.json", "cannot write in directory /proc"),
    ("/sys/p.json", "cannot write in directory /sys"),
    ("n" * 300, "is 300 bytes; the limit is 255"),
    ("LOOP", "is a symbolic link that leads nowhere"),
    ("nodir/deeper/p.json", "nodir/deeper does not exist"),
    ("BADPROFILE", "field 'profile': top level must be a JSON object"),
])
def test_proxies_check_the_output_before_measuring(
        out: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _no_measuring(monkeypatch)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "FILE").write_text("mine")
    (tmp_path / "LOOP").symlink_to("LOOP")
    (tmp_path / "BADPROFILE").write_text("[1, 2]")
    line = one_error_line(["proxies", "matvec", "--hidden", "64", "--steps", "2",
                           "--out", out])
    assert message in line and ("--out" in line or out == "BADPROFILE")
    assert (tmp_path / "FILE").read_text() == "mine" and not (tmp_path / "nodir").exists()


@pytest.mark.parametrize(("env", "message"), [
    ({"ARCHIPELAGO_HOME": "/proc"}, "environment: ARCHIPELAGO_HOME='/proc': profile "
     "/proc/cpu-proxies.json: cannot write in directory /proc"),
    ({"ARCHIPELAGO_HOME": "FILE"}, "environment: ARCHIPELAGO_HOME='FILE': profile "
     "FILE/cpu-proxies.json: cannot create directory FILE"),
    ({"ARCHIPELAGO_HOME": "", "HOME": "/proc"}, "environment: HOME='/proc' "
     "(~/.cache/archipelago): profile /proc/.cache/archipelago/cpu-proxies.json: cannot "
     "create directory"),
])
def test_proxies_name_the_variable_a_bad_default_location_comes_from(
        env: dict[str, str], message: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    _no_measuring(monkeypatch)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "FILE").write_text("mine")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    line = one_error_line(["proxies", "matvec", "--hidden", "64", "--steps", "2"])
    assert line.startswith(f"error: {message}")


@pytest.mark.parametrize(("args", "message"), [
    (["--hidden", "-5"], "--hidden: applies only to a MODEL's program"),
    (["--steps", "0"], "--steps: applies only to a MODEL's program"),
    (["--cluster", "0xfoo", "--steps", "3"], "--cluster, --steps: apply only to a MODEL's"),
    (["", "--hidden", "64"], "unknown model ''"),
])
def test_proxies_refuse_options_that_size_no_model(
        args: list[str], message: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    _no_measuring(monkeypatch)
    line = one_error_line(["proxies", *args, "--out", str(tmp_path / "p.json")])
    assert line.startswith(f"error: {message}")


def test_emulate_exits_1_when_the_split_run_disagrees(monkeypatch) -> None:
    """A split run whose outputs differ from its reference is a failed check, as a CI job
    reads it: the report still prints, and the exit status is 1 (0 when it agrees)."""
    import archipelago.api

    for agrees, status in ((False, 1), (True, 0)):
        report = {"model": "m", "agrees": agrees, "outputs_equal": agrees}
        monkeypatch.setattr(archipelago.api, "emulate", lambda *a, _r=report, **k: _r)
        result = RUNNER.invoke(app, ["emulate", "vfs", "--cluster", "hacc", "--strategy",
                                     "chef", "--json"])
        assert result.exit_code == status, result.output
        assert json.loads(result.stdout)["agrees"] is agrees

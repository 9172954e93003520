"""Issue 39 point 7: an error line repeats a user's long value elided, not whole. A
4,250-character --out (components each within the 255-byte name limit, so the system
refuses the whole) and a 5,000-character --scheduler were echoed in 4,339- and
5,087-character lines; each is now one line within the message limit that keeps the
value's start and its file name."""

import pytest
from typer.testing import CliRunner

from archipelago.cli import app
from archipelago.errors import ERROR_PREFIX, MESSAGE_LIMIT

RUNNER = CliRunner()
LONG_DIR = "/tmp/" + "/".join(["d" * 200] * 21)  # 4,225 characters, no name over 255 bytes
LONG_HOST = "tcp://" + "h" * 4990 + ":8786"


@pytest.fixture(autouse=True)
def _nothing_written(tmp_path, monkeypatch) -> None:
    """Each refusal runs in an empty directory and leaves it empty (a default store or
    study journal would land there)."""
    monkeypatch.chdir(tmp_path)
    yield
    assert list(tmp_path.iterdir()) == []


def one_line(args: list[str]) -> str:
    result = RUNNER.invoke(app, args)
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1, (result.exit_code, result.output)
    assert len(lines[0]) <= MESSAGE_LIMIT + len(ERROR_PREFIX), len(lines[0])
    return lines[0]


@pytest.mark.parametrize(("args", "option", "name"), [
    (["build", "gpt2-345m", "--out", f"{LONG_DIR}/b"], "--out", "/b"),
    (["report", "gpt2-345m", "--out", f"{LONG_DIR}/r.html"], "--out", "/r.html"),
    (["proxies", "--out", f"{LONG_DIR}/p.json"], "--out", "/p.json"),
    (["explore", "gpt2-345m", "--strategy", "lora-q", "--trials", "2", "--out",
      f"{LONG_DIR}/e.yaml"], "--out", "/e.yaml"),
    (["compare", "gpt2-345m", "--tokens", "8:8", "--batch", "1", "--report",
      f"{LONG_DIR}/c.html"], "--report", "/c.html"),
])
def test_a_long_output_path_is_elided_keeping_its_name(args: list[str], option: str,
                                                      name: str) -> None:
    line = one_line(args)
    assert line.startswith(f"error: {option} /tmp/ddd") and "characters]..." in line
    assert f"{name}: File name too long" in line


@pytest.mark.parametrize("command", [["compare", "gpt2-345m", "--tokens", "8:8"],
                                     ["explore", "gpt2-345m", "--strategy", "lora-q"]])
def test_a_host_longer_than_any_host_name_is_not_an_address(command: list[str]) -> None:
    line = one_line([*command, "--scheduler", LONG_HOST])
    assert line.startswith("error: --scheduler 'tcp://hhh") and "characters]..." in line
    assert line.endswith("hhh:8786' is not a scheduler address; give tcp://HOST:PORT, e.g. "
                         "tcp://10.0.0.5:8786")


@pytest.mark.parametrize(("args", "field"), [
    (["emulate", "gpt2-345m", "--cluster", "2xu280", "--checkpoint", f"{LONG_DIR}/ck"],
     "--checkpoint"),
    (["explore", "gpt2-345m", "--strategy", "lora-q", "--storage", f"{LONG_DIR}/st"],
     "--storage"),
])
def test_a_directory_named_past_the_path_limit_is_one_line(args: list[str], field: str) -> None:
    """pathlib's is_dir and exists raise ENAMETOOLONG (Python 3.11): these two options
    ended in a traceback."""
    line = one_line(args)
    assert line.startswith("error: /tmp/ddd") and "characters]..." in line
    assert line.endswith(f": field '{field}': cannot be read: File name too long")

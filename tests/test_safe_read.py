"""The safe reader and the validated edge: each of issue 14's hostile inputs ends in one
`error:` line naming the file or option, exit 2, and nothing hangs."""

import errno
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from archipelago import safe_read
from archipelago.cli import app
from archipelago.errors import ConfigError

RUNNER = CliRunner()


def one_error_line(args: list[str], env: dict[str, str] | None = None) -> str:
    result = RUNNER.invoke(app, args, env=env)
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    made = {
        "utf16": ("devices: [{device: u280}]\n".encode("utf-16")),
        "binary": b"devices:\n  - device: u2\xff\xfe80\n",
        "deep.json": b"[" * 100_000 + b"]" * 100_000,
        "bomb.yaml": b"a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + b"".join(
            f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n".encode() for i in range(1, 9)),
        "tag.yaml": b"!!python/object/apply:os.system ['true']\n",
        "model_type.json": b'{"model_type": ["gpt2"]}',
        "negative.json": b'{"model_type": "gpt2", "n_embd": 64, "n_head": 4, "n_layer": -2,'
                         b' "vocab_size": 97, "n_positions": 64}',
        "huge.json": b'{"model_type": "gpt2", "n_embd": 64, "n_head": 4, "n_layer": 10000000,'
                     b' "vocab_size": 97, "n_positions": 64}',
        "hbm0.yaml": b"hbm_channels: 0\n",
        "l13.yaml": b"l: 1.3\n",
        "nan_link.yaml": b"devices: [{device: u280, count: 2}]\nlink: {latency_ns: .nan, "
                         b"bandwidth_gbps: 100}\n",
        "big_count.yaml": b"devices: [{device: u280, count: 100000000000000000000}]\n",
        "digits.json": b'{"model_type": "gpt2", "n_embd": ' + b"9" * 5000 + b"}",
        "date.yaml": b"l: 2020-02-30\n",
        "a_file": b"",
        "engine_abc.yaml": b"engine: abc\n",
        "lanes.yaml": b"l: 0\n",
        "newline_name.yaml": b'name: "a\\nb"\ndevices: [{device: u280, count: 2}]\n',
        "fc_huge.yaml": b"layers:\n  - {name: a, type: fc, in_features: 3, out_features: "
                        + b"9" * 200 + b"}\n",
    }
    paths = {}
    for name, data in made.items():
        paths[name] = tmp_path / name
        paths[name].write_bytes(data)
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    paths["fifo"] = fifo
    return paths


@pytest.mark.parametrize(("args", "expected"), [
    (["plan", "gpt2-345m", "--cluster", "{utf16}"], "is UTF-16 encoded; save it as UTF-8"),
    (["plan", "gpt2-345m", "--cluster", "{binary}"], "is not UTF-8 text (byte 0xff at offset"),
    (["plan", "gpt2-345m", "--cluster", "{fifo}"], "is a FIFO (named pipe), not a regular"),
    (["plan", "gpt2-345m", "--cluster", "/dev/zero"], "is a character device, not a regular"),
    (["plan", "gpt2-345m", "--engine-config", "{fifo}"], "is a FIFO"),
    (["plan", "{deep.json}"], "nests deeper than 32 levels"),
    (["plan", "gpt2-345m", "--cluster", "{bomb.yaml}"], "holds more than 100000 values"),
    (["plan", "gpt2-345m", "--engine-config", "{tag.yaml}"], "could not determine a constructor"),
    (["plan", "{model_type.json}"], "unknown model_type"),
    (["plan", "{negative.json}"], "n_layer': must be a positive integer, got -2"),
    (["plan", "{huge.json}"], "field 'layers': Input should be less than or equal to 1024"),
    (["plan", "gpt2-345m", "--engine-config", "{hbm0.yaml}"], "'hbm_channels' = 0"),
    (["plan", "gpt2-345m", "--engine-config", "{l13.yaml}"], "'l' = 1.3"),
    (["plan", "gpt2-345m", "--cluster", "{nan_link.yaml}"], "field 'link.latency_ns'"),
    (["plan", "gpt2-345m", "--cluster", "{big_count.yaml}"],
     "field 'devices.0.count': Input should be less than or equal to 4096"),
    (["plan", "gpt2-345m", "--cluster", "100000000000000000000xu280"],
     "device count 100000000000000000000 is out of range 1..4096"),
    (["plan", "gpt2-345m", "--tokens", "1000000000000000000000000000000:1"],
     "both counts must be in 1..1048576"),
    (["plan", "bert-base", "--strategy", "galapagos", "--cluster", "72xsidewinder",
      "--seq-len", "0"], "--seq-len 0: must be in 1..1048576"),
    (["emulate", "gpt2-345m", "--seed", str(2**64)], "--seed 18446744073709551616: must be"),
    (["emulate", "gpt2-345m", "--seed", "-1"], "--seed -1: must be in 0..9223372036854775807"),
    (["plan", "gpt2-345m", "--cluster", "x\ry"], "unknown cluster 'x\\ry'; valid choices: "),
    (["plan", "{digits.json}"], "holds a value that cannot be read: Exceeds the limit (4300"),
    (["plan", "gpt2-345m", "--engine-config", "{date.yaml}"], "day is out of range for month"),
    (["plan", "ibert-base", "--strategy", "galapagos", "--cluster", "72xsidewinder",
      "--engine-config", "{engine_abc.yaml}"], "field 'engine': must be a mapping of design"),
    (["plan", "{fc_huge.yaml}", "--strategy", "h2h", "--cluster", "hacc"],
     "field 'layers.0.fc.out_features': Input should be less than or equal to 1048576"),
    (["plan", "gpt2-345m", "--tokens", "\u0664:\u0662"], "must look like IN:OUT"),  # Arabic 4:2
    (["plan", "gpt2-345m", "--cluster", "\u0664xu280"],
     "cluster '\u0664xu280'; valid choices: <cluster YAML path>, NxDEVICE (e.g. 4xu280;"),
    (["plan", "gpt2-345m", "--strategy", "dfx", "--engine-config", "{lanes.yaml}"],
     "lanes.yaml: dfx engine parameter 'l' = 0: Input should be greater than or equal to 1"),
    (["plan", "gpt2-345m", "--cluster", "{newline_name.yaml}"],
     "field 'name': must be printable text on one line"),
    (["plan", "gpt2-345m", "--cluster", ""], "unknown cluster ''; valid choices: <cluster"),
    (["plan", "x" * 300], "field 'model': cannot be read: File name too long"),
    (["plan", "gpt2-345m", "--cluster", "x" * 300 + ".yaml"], "cannot be read: File name too"),
    (["plan", "cnn-lstm", "--strategy", "chef", "--cluster", "hacc", "--gantt", "/proc/g.html"],
     "--gantt /proc/g.html: cannot write in directory /proc"),
    (["plan", "cnn-lstm", "--strategy", "chef", "--cluster", "hacc", "--gantt",
      "{a_file}/g.html"], "is not a directory"),
    (["plan", "cnn-lstm", "--strategy", "chef", "--cluster", "hacc", "--gantt",
      "g" * 300 + ".html"], "is 305 bytes; the limit is 255"),
    (["plan", "cnn-lstm", "--strategy", "chef", "--cluster", "hacc", "--gantt", "chart"],
     "--gantt chart: the file name must end in .html or .htm"),
    (["report", "gpt2-345m", "--out", "/sys/r.html"], "cannot write in directory /sys"),
    # the parser's own usage errors
    (["catalog", "--bogus"], "No such option: --bogus; valid: --help, --json (see `"),
    (["nosuchcommand"], "No such command 'nosuchcommand'; valid: plan, report, emulate,"),
    (["plan"], "Missing argument 'model' (see `"),
    (["plan", "gpt2-345m", "--cluster"], "Option '--cluster' requires an argument"),
    (["catalog", "--json=1"], "Option '--json' does not take a value"),
])
def test_hostile_input_is_one_error_line(args, expected, files) -> None:
    named = {k.replace(".", "_"): v for k, v in files.items()}
    line = one_error_line([a.format(**named)
                           if "{" in a else a for a in _keys(args)])
    assert expected in line


def _keys(args: list[str]) -> list[str]:
    return [a.replace(".json}", "_json}").replace(".yaml}", "_yaml}") for a in args]


def test_a_bare_archi_prints_its_commands_not_an_error() -> None:
    result = RUNNER.invoke(app, [])
    assert result.exit_code == 0 and "plan" in result.stdout and "emulate" in result.stdout


def test_a_directory_and_a_missing_file_are_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=f"{tmp_path}: field 'cluster': is a directory"):
        safe_read.load_mapping(tmp_path, "cluster")
    with pytest.raises(ConfigError, match="field 'cluster': not found"):
        safe_read.load_mapping(tmp_path / "nope.yaml", "cluster")


def test_permission_is_reported_as_such(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("devices: []\n")

    def refuse(*args: object, **kwargs: object) -> int:  # root ignores chmod, so patch
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(safe_read.os, "open", refuse)
    with pytest.raises(ConfigError, match="permission denied"):
        safe_read.read_text(path, "cluster")


def test_a_file_past_the_size_limit_is_refused_unread(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "big.yaml"
    path.write_text("a: 1\n" * 100)
    monkeypatch.setattr(safe_read, "MAX_BYTES", 64)
    with pytest.raises(ConfigError, match="is 500 bytes; the limit is 64 bytes"):
        safe_read.read_text(path)


def test_a_byte_order_mark_and_plain_utf8_are_read(tmp_path: Path) -> None:
    path = tmp_path / "ok.yaml"
    path.write_bytes("\ufeffname: café\n".encode())
    assert safe_read.load_mapping(path, "cluster") == {"name": "café"}

"""Issue 25's hostile inputs on heterogeneous clusters, build outputs, messages and types,
met as the user meets them: through `archi`, each an exit status 2, one `error:` line of at
most about 300 characters, no traceback, and nothing written."""

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from archipelago.errors import elide
from archipelago.safe_read import load_yaml
from tests.cli_here import archi_here

TWO_FPGAS = [{"name": "a", "device": "u280"}, {"name": "b", "device": "u250"}]
LONG = "x" * 5000


def archi_in(folder: Path, *args: str) -> subprocess.CompletedProcess:
    """`archi ARGS` run in `folder`, in this process (tests/cli_here.py): what a refusal says
    and leaves behind needs no fresh interpreter, whose start-up was most of each case."""
    return archi_here(*args, cwd=folder)


def refused(folder: Path, files: dict[str, object], *args: str) -> str:
    """The one error line of `archi ARGS` run in `folder` holding `files` (documents);
    fails unless the command refused without writing anything."""
    for name, doc in files.items():
        (folder / name).write_text(json.dumps(doc) if name.endswith(".json")
                                   else yaml.safe_dump(doc))
    before = sorted(p.name for p in folder.iterdir())
    out = archi_in(folder, *args)
    assert out.returncode == 2, (out.stdout, out.stderr)
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), out.stderr
    assert "Traceback" not in out.stderr and len(lines[0]) <= 320, lines[0]
    assert sorted(p.name for p in folder.iterdir()) == before
    return lines[0]


# ---- heterogeneous clusters --------------------------------------------------------------
@pytest.mark.parametrize(("files", "args", "message"), [
    # a denormal BW_inter: H2H's AssertionError and CHEF's DRAM message before
    ({}, ("--strategy", "h2h", "--bandwidth", "5e-324"),
     "--bandwidth 5e-324: give 0.001..10000 GB/s (1 MB/s to 10 TB/s)"),
    ({}, ("--strategy", "chef", "--bandwidth", "5e-324"), "--bandwidth 5e-324: give"),
    ({"c.yaml": {"fpgas": TWO_FPGAS, "p2p_gbps": 5e-324}}, ("--cluster", "c.yaml"),
     "c.yaml: field 'p2p_gbps': Input should be greater than or equal to 0.001"),
    ({"c.yaml": {"nodes": TWO_FPGAS, "topology": "switch",
                 "link": {"latency_ns": 5e-324, "bandwidth_gbytes_s": 3}}},
     ("--cluster", "c.yaml"), "field 'link.latency_ns': 5e-324 ns is below a picosecond"),
    # 20 TB/s: twice the ceiling of 10 TB/s
    ({"c.yaml": {"nodes": TWO_FPGAS, "link": {"latency_ns": 0, "bandwidth_gbytes_s": 2e4}}},
     ("--cluster", "c.yaml"),
     "field 'link.bandwidth_gbytes_s': Input should be less than or equal to 10000"),
    ({"c.yaml": {"fpgas": TWO_FPGAS, "pairs": [{"a": "a", "b": "a", "gbps": 3}]}},
     ("--cluster", "c.yaml"), "field 'pairs.0': 'a' paired with itself"),
    ({"c.yaml": {"fpgas": TWO_FPGAS, "pairs": [{"a": "a", "b": "b", "gbps": 3},
                                                {"a": "b", "b": "a", "gbps": 5}]}},
     ("--cluster", "c.yaml"), "field 'pairs.1': 'b' and 'a' are paired twice"),
    # 1 DSP is a legal FPGA on which nothing fits: the smallest built-in conv IP has
    # 8 x 16 MAC lanes of 5 DSPs each (seeds/004 §I) = 640 DSPs
    ({"c.yaml": {"fpgas": [{**f, "dsp": 1} for f in TWO_FPGAS]}}, ("--cluster", "c.yaml"),
     "layer 'rgb_conv1_1' (conv 3x3, 3->32): no conv IP fits any FPGA of 'c': ip "
     "'conv_8_16' needs 640 DSP, fpga 'b' has 1 DSP;"),
    ({"e.yaml": {"ips": []}}, ("--engine-config", "e.yaml"),
     "layer 'rgb_conv1_1' (conv 3x3, 3->32): no candidate IP is a conv IP; candidates: none, "
     "from the engine config's `ips: []`"),
    # 64 x 64 lanes x 5 DSPs = 20,480 DSPs; a U250 has 12,288 (DS962)
    ({"ips.yaml": {"ips": {"huge": {"type": "conv", "tn": 64, "tm": 64}}},
      "e.yaml": {"ip_file": "ips.yaml"}}, ("--engine-config", "e.yaml"),
     "no conv IP fits any FPGA of 'hacc': ip 'huge' needs 20,480 DSP, fpga 'u250' has 12,288 "
     "DSP (candidates from ip_file ips.yaml)"),
])
def test_hostile_heterogeneous_clusters_are_refused_by_name(tmp_path, files, args, message):
    strategy = () if "--strategy" in args else ("--strategy", "chef")
    assert message in refused(tmp_path, files, "plan", "cnn-lstm", *strategy, *args)


# ---- build and the other outputs ----------------------------------------------------------
@pytest.mark.parametrize("args", [
    ("build", "bert-base", "--strategy", "galapagos", "--out", "", "--force"),
    ("plan", "cnn-lstm", "--strategy", "chef", "--report", ""),
    ("report", "cnn-lstm", "--strategy", "chef", "--out", ""),
    ("compare", "bert-base", "--tokens", "8:8", "--store", ""),
    ("compare", "bert-base", "--tokens", "8:8", "--report", ""),
    ("explore", "gpt2-345m", "--strategy", "dfx", "--out", ""),
    ("proxies", "--out", ""),
    ("proxies", "lstm", "--out", " "),
])
def test_an_empty_output_name_writes_nothing(tmp_path, args):
    """`build --out '' --force` wrote 39 files into the working directory; `proxies --out ''`
    timed its calls and was then refused as "--out . is a directory"."""
    blank = next(a for a in args if not a.strip())
    option = args[args.index(blank) - 1]
    assert f"Invalid value for '{option}': {blank!r} is an empty name" in \
        refused(tmp_path, {}, *args)


@pytest.mark.parametrize(("args", "message"), [
    (("plan", "cnn-lstm", "--strategy", "chef", "--gantt", ""), "--gantt '' is an empty name"),
    (("explore", "gpt2-345m", "--strategy", "dfx", "--study", ""), "--study '': String should"),
])
def test_an_empty_gantt_or_study_is_refused(tmp_path, args, message):
    assert message in refused(tmp_path, {}, *args)


# ---- messages ------------------------------------------------------------------------------
def test_elide_keeps_both_ends_within_the_limit():
    assert elide("short") == "short"
    cut = elide("a" * 100 + "b" * 100, 60)
    # 200 characters: the mark "...[200 characters]..." (22) and 19 + 19 kept around it
    assert cut == "a" * 19 + "...[200 characters]..." + "b" * 19 and len(cut) == 60


def test_a_long_path_keeps_its_file_name_whole():
    from archipelago.errors import elide_path

    path = "/" + "d" * 200 + "/model.onnx"
    cut = elide_path(path, 60)
    # 60 = 27 of the directories, the mark "...[212 characters]..." (22), "/model.onnx" (11)
    assert cut == path[:27] + "...[212 characters]..." + "/model.onnx" and len(cut) == 60
    assert elide_path("/short/model.onnx", 60) == "/short/model.onnx"
    name = "n" * 100 + ".onnx"  # a name longer than the limit is cut like any text
    assert elide_path("/d/" + name, 60) == elide("/d/" + name, 60)


@pytest.mark.parametrize(("files", "args", "start"), [
    # a 20,000-item list echoed whole was 129,110 characters
    ({"e.yaml": {"ips": [f"ip{i}" for i in range(20_000)]}},
     ("plan", "cnn-lstm", "--strategy", "chef", "--engine-config", "e.yaml"),
     "error: unknown IP(s) ip0, ip1"),
    ({}, ("plan", "cnn-lstm", "--strategy", LONG), "error: unknown strategy 'xxx"),
    ({}, ("plan", "cnn-lstm", "--strategy", "chef", f"--{LONG}", "1"), "error: --xxx"),
    ({}, ("build", "ibert-base", "--out", "o", f"--{LONG}", "1"), "error: --xxx"),
    ({"c.yaml": {"nodes": [{"device": "u280"}], "topology": LONG}},
     ("plan", "cnn-lstm", "--strategy", "chef", "--cluster", "c.yaml"),
     "error: c.yaml: field 'topology': Input should be 'ring', 'switch' or 'host_star'"),
])
def test_long_input_is_elided_in_one_short_line(tmp_path, files, args, start):
    line = refused(tmp_path, files, *args)
    assert line.startswith(start) and " characters]..." in line


def test_a_cpu_profile_is_named_by_its_path(tmp_path):
    profile = {"machine": "a string inside the file",
               "calls": {"cpu_tanh": [[64, 1e-6], [128, 2e-6]]}}
    line = refused(tmp_path, {"p.json": profile}, "plan", "lstm", "--strategy", "persistent",
                   "--cpu-profile", "p.json")
    assert line.startswith("error: p.json: field 'calls.cpu_") and "inside" not in line


def test_a_slow_search_leaves_no_blank_line_off_a_terminal(capsys):
    """chef-exact's refusals started with a blank line: rich's bar, stopped off a terminal."""
    from archipelago.progress_bar import SlowProgress

    progress = SlowProgress("exact search:")
    progress.started -= 2.0  # as if the search had run two seconds
    progress()
    progress.close()
    assert capsys.readouterr().err == ""


# ---- lax types ------------------------------------------------------------------------------
@pytest.mark.parametrize(("files", "args", "message"), [
    ({"c.yaml": {"nodes": [{"device": "u280", "count": True}]}}, ("--cluster", "c.yaml"),
     "c.yaml: field 'nodes.0.count': Input should be a valid integer (got True)"),
    ({"c.yaml": {"fpgas": [{**TWO_FPGAS[0], "dsp": "16"}, TWO_FPGAS[1]]}},
     ("--cluster", "c.yaml"), "c.yaml: field 'fpgas.0.dsp': Input should be a valid integer "
                              "(got '16')"),
    ({"c.yaml": {"nodes": [{"device": "mine"}, {"device": "u280"}], "custom_devices": {
        "mine": {"name": "m", "kind": "fpga", "vendor": "v", "resources": {"dsp": True}}}}},
     ("--cluster", "c.yaml"), "field 'mine.resources.dsp': Input should be a valid integer"),
    ({"e.yaml": {"max_accs_per_fpga": True}}, ("--engine-config", "e.yaml"),
     "e.yaml: field 'max_accs_per_fpga': must be a number, got the boolean true"),
    ({"e.yaml": {"max_accs_per_fpga": "3"}}, ("--engine-config", "e.yaml"),
     "e.yaml: field 'max_accs_per_fpga': must be a number, got the text '3'"),
    ({"ips.yaml": {"ips": {"c": {"type": "conv", "tm": True}}}, "e.yaml": {"ip_file": "ips.yaml"}},
     ("--engine-config", "e.yaml"),
     "ips.yaml: field 'ips.c.tm': Input should be a valid integer (got True)"),
])
def test_a_boolean_or_quoted_number_is_refused_naming_the_field(tmp_path, files, args, message):
    assert message in refused(tmp_path, files, "plan", "cnn-lstm", "--strategy", "chef", *args)


CONV = {"name": "c1", "type": "conv", "out_ch": 16, "in_ch": 3, "out_rows": 8, "out_cols": 8,
        "kernel": 3}


@pytest.mark.parametrize(("files", "args", "message"), [
    ({"d.yaml": {"layers": [{**CONV, "kernel": True}]}}, ("d.yaml", "--strategy", "chef"),
     "d.yaml: field 'layers.0.kernel': must be a number, got the boolean true"),
    ({"d.yaml": {"layers": [{**CONV, "in_ch": "3"}]}}, ("d.yaml", "--strategy", "chef"),
     "d.yaml: field 'layers.0.in_ch': must be a number, got the text '3'"),
    ({"p.json": {"calls": {"cpu_tanh": [[True, 1e-6], [128, 2e-6]]}}},
     ("lstm", "--strategy", "persistent", "--cpu-profile", "p.json"),
     "p.json: field 'calls.cpu_tanh.0.0': Input should be a valid integer (got True)"),
])
def test_lax_numbers_in_model_and_profile_files_are_refused(tmp_path, files, args, message):
    assert message in refused(tmp_path, files, "plan", *args)


def test_an_unquoted_exponent_is_a_number_and_a_quoted_one_text(tmp_path):
    """Strict numbers would refuse `1e9` were it read as text, as YAML 1.1 reads it."""
    path = tmp_path / "c.yaml"
    path.write_text("a: 1e9\nb: -2E+3\nc: '1e9'\nd: 1e\n")
    assert load_yaml(path) == {"a": 1e9, "b": -2000.0, "c": "1e9", "d": "1e"}

"""`archi` with the scheduled-DAG strategies: chef, h2h, chef-exact."""

import json
import subprocess
import sys

import pytest

from tests.cli_here import archi_here


def archi(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "archipelago", *args],
                          capture_output=True, text=True, timeout=300)


def test_plan_vfs_on_hacc_json():
    out = archi("plan", "vfs", "--cluster", "hacc", "--strategy", "chef", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    for key in ("latency_s", "deployment", "mapping", "comm_ratio", "steps_latency_s",
                "search_s"):
        assert key in data
    assert {"accelerator", "start_s", "end_s"} <= set(data["mapping"][0])
    assert {"dsp_used", "dsp_available", "bram_used", "bram_available"} <= set(
        data["deployment"][0])


def test_h2h_bandwidth_and_gantt(tmp_path):
    gantt = tmp_path / "g.html"
    out = archi("plan", "cnn-lstm", "--cluster", "chef-cluster1", "--strategy", "h2h",
                "--bandwidth", "15", "--gantt", str(gantt), "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert len(data["steps_latency_s"]) == 4 and data["gantt"] == str(gantt)
    assert gantt.exists()


@pytest.mark.parametrize(("args", "message"), [
    (("plan", "vfs", "--cluster", "hacc", "--strategy", "chef-exact"), "exact deployment"),
    (("plan", "vfs", "--cluster", "4xu280", "--strategy", "dfx"),
     "strategy 'dfx' plans transformers; vfs is a layer graph (a layer-DAG YAML, ONNX or "
     ".pt2 file); strategies for it: chef"),
    (("plan", "gpt2-345m", "--cluster", "hacc", "--strategy", "dfx"),
     "strategy 'dfx' needs identical devices; cluster 'hacc' mixes ['u250', 'u280']"),
    (("plan", "vfs", "--cluster", "hacc", "--strategy", "chef", "--bandwidth", "0"),
     "--bandwidth 0: give 0.001..10000 GB/s"),
    (("plan", "vfs", "--cluster", "hacc", "--strategy", "chef", "--bandwidth", "fast"),
     "--bandwidth 'fast': give GB/s between every pair of FPGAs as a number"),
])
def test_bad_input_is_one_line_exit_2(args, message):
    out = archi_here(*args)  # in this process: the refusal needs no fresh interpreter
    assert out.returncode == 2 and message in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr


def test_user_dag_with_a_cycle(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text("name: m\nlayers:\n"
                    "  - {name: a, type: fc, in_features: 4, out_features: 4, deps: [b]}\n"
                    "  - {name: b, type: fc, in_features: 4, out_features: 4, deps: [a]}\n")
    out = archi("plan", str(path), "--cluster", "hacc", "--strategy", "chef")
    assert out.returncode == 2 and "cycle through a, b" in out.stderr

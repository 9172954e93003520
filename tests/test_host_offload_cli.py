"""`archi` with the `persistent` strategy (seeds/003): the commands of issue #12."""

import json

import pytest

from tests.test_cli import archi


def test_plan_json_has_the_documented_keys() -> None:
    out = archi("plan", "nmt-luong", "--cluster", "8xs10-2800", "--strategy", "persistent",
                "--steps", "50", "--json")
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    for key in ("latency_s", "params", "breakdown_s", "per_call", "onchip_bytes", "feasible",
                "reasons"):
        assert key in r
    assert set(r["breakdown_s"]) == {"cpu", "fpga", "comm"} and len(r["onchip_bytes"]) == 8
    assert r["steps"] == 50 and r["model"] == "nmt-luong-1024"


def test_partition_and_streamed_weights_from_the_command_line() -> None:
    out = archi("plan", "matvec", "--cluster", "8xs10-2800", "--strategy", "persistent",
                "--hidden", "4096", "--partition", "2x4", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["per_call"]["cpu_add"]["count"] == 2 * 3
    out = archi("plan", "nmt-li", "--cluster", "1xs10-2800", "--strategy", "persistent",
                "--hidden", "512", "--weights", "ddr4", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["weights"] == "ddr4"


def test_explore_largest_and_latency_target() -> None:
    out = archi("explore", "lstm", "--cluster", "2xs10-2800", "--strategy", "persistent",
                "--largest", "--steps", "4", "--json")
    assert out.returncode == 0, out.stderr
    largest = json.loads(out.stdout)
    assert largest["hidden"] > 0 and largest["feasible"] and "latency_s" in largest
    out = archi("explore", "lstm", "--cluster", "1xs10-2800", "--strategy", "persistent",
                "--hidden", "1024", "--steps", "4", "--latency-target", "1ms", "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["devices"]
    assert set(rows) == {"a10-1150", "s10-2800", "s10-2100-tr"}


def test_emulate_json_reports_the_checks() -> None:
    out = archi("emulate", "nmt-luong", "--hidden", "64", "--cluster", "4xs10-2800",
                "--strategy", "persistent", "--json")
    assert out.returncode == 0, out.stderr
    # the cards' fork server left multiprocessing's exit hook a directory the command's
    # scratch removal had taken: a traceback after a successful run
    assert "Traceback" not in out.stderr, out.stderr
    r = json.loads(out.stdout)
    assert r["cards"] == 4 and r["trace_matches_plan"] and r["tokens_match"] and r["agrees"]
    assert r["states_within_tolerance"] and len(r["integer_checksum"]) == 16


@pytest.mark.parametrize(("args", "message"), [
    (("plan", "nmt-luong", "--cluster", "1xa10-1150"), "needs 1"),
    (("plan", "matvec", "--cluster", "8xs10-2800", "--hidden", "100", "--partition", "3x1"),
     "uses 3 cards; the cluster has 8"),
    (("plan", "matvec", "--cluster", "3xs10-2800", "--hidden", "100", "--partition", "3x1"),
     "does not divide the 100 x 100 matrix"),
    (("plan", "nmt-li", "--cluster", "8xs10-2800", "--beam", "0"), "beam width 0"),
    (("plan", "nmt-li", "--cluster", "8xs10-9000"), "unknown device 's10-9000'"),
    (("plan", "nmt-li", "--cluster", "8xu280"), "not one (valid: a10-1150"),
    (("plan", "gpt2-345m", "--cluster", "8xs10-2800"),
     "plans matrix-vector products, LSTM stacks or attention NMT models; gpt2-345m is a "
     "transformer"),
    (("plan", "nmt-li", "--cluster", "2xu280", "--strategy", "dfx"), "strategies for it: "
                                                                     "persistent"),
    (("plan", "nmt-li", "--cluster", "8xs10-2800", "--tokens", "8:8"), "--tokens applies to"),
    (("explore", "nmt-li", "--cluster", "8xs10-2800"), "takes --largest or --latency-target"),
    (("explore", "nmt-li", "--cluster", "8xs10-2800", "--latency-target", "soon"),
     "give a positive number and a unit"),
])
def test_bad_input_is_one_line_and_exit_2(args: tuple[str, ...], message: str) -> None:
    full = [*args] if "--strategy" in args else [*args, "--strategy", "persistent"]
    out = archi(*full)
    assert out.returncode == 2, out.stdout
    assert message in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr

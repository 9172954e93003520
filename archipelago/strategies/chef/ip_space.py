"""CHEF's IP candidates bounded by the boards (issue 34): each template grown to the most
parallel instance an FPGA of the cluster holds, beside the templates themselves.

seeds/004 does not list its IP candidates (ip_templates.yaml says so); the built-in ones
span Table II's FPGAs from the ZC706 to the U250 with fixed degrees, so on a board larger
than the one a template was written for, A2F (Eq. 2) could only deploy several small IPs,
never one sized to the board. Here every template grows along its parallel axis, keeping
its other fields (tiles, kernel window, weight buffer):
    conv, fc   tm, the output channels, in steps of GROW_STEP lanes (tn kept: the input
               channels a pass reads);
    dwconv     tn, the channel lanes, in steps of GROW_STEP;
    lstm       parallel, the MACs a cycle, in steps of LSTM_STEP (ref [26]'s gates);
to the largest whose DSPs and BRAMs (IPTemplate.resources: five DSPs an FP32 MAC, §I; the
UG573 block counts) fit the board, within the field's bound. A template the board cannot
grow beyond adds nothing. The templates stay candidates: Eq. (2)'s throughput over the
larger set is at least the templates' (the latency after M2A and re-deployment is the
search's, not bounded by it; on hacc no built-in DAG ends slower, tests/test_chef_ip_space.py).

The five DSPs per FP32 MAC are seeds/004 §I's, for the DSP48E1/E2 of Table II's boards
(every CHEF cluster's); the DSP kind does not change them here: the DSP58's FP32 mode
(AM004) would make an IP's resources depend on the FPGA it is deployed on, which
IPTemplate.resources does not model.
"""

from collections.abc import Iterable

from archipelago.hardware.device import Resources
from archipelago.strategies.chef.ip_templates import IPTemplate

GROW_STEP = 8  # lanes: the built-in templates' degrees are multiples of 8
LSTM_STEP = 64  # MACs a cycle: the built-in LSTM IPs' 64 and 256
# The field each IP type grows, and its step.
AXIS = {"conv": ("tm", GROW_STEP), "fc": ("tm", GROW_STEP), "dwconv": ("tn", GROW_STEP),
        "lstm": ("parallel", LSTM_STEP)}


def _fits(ip: IPTemplate, board: Resources) -> bool:
    need = ip.resources
    return need.dsp <= board.dsp and need.bram <= board.bram


def grown(ip: IPTemplate, board: Resources) -> IPTemplate | None:
    """`ip` with its parallel axis at the largest multiple of its step that `board` holds
    (named `<template>+<field><value>`), or None where that is no larger than `ip`'s own."""
    field, step = AXIS[ip.type]
    limit = IPTemplate.model_fields[field].metadata  # the field's own upper bound
    top = min(m.le for m in limit if hasattr(m, "le"))
    low, high = getattr(ip, field) // step, top // step  # multiples of step, bisected
    best = None
    while low <= high:
        mid = (low + high) // 2
        candidate = IPTemplate.model_validate({**ip.model_dump(), field: mid * step,
                                               "name": f"{ip.name}+{field}{mid * step}"})
        if mid > 0 and _fits(candidate, board):
            best, low = candidate, mid + 1
        else:
            high = mid - 1
    if best is None or getattr(best, field) <= getattr(ip, field):
        return None
    return best


def _shape(ip: IPTemplate) -> tuple:
    """An IP's fields but its name: two templates grown alike are one candidate."""
    return tuple(sorted(ip.model_dump(exclude={"name"}).items()))


def device_candidates(templates: Iterable[IPTemplate], boards: Iterable[Resources]
                      ) -> list[IPTemplate]:
    """The templates, then each grown to each distinct board, leaving out a grown IP equal
    to one already there (dwconv_8 and dwconv_64 grow to the same one)."""
    templates = list(templates)
    shapes = {_shape(ip) for ip in templates}
    out = list(templates)
    for board in dict.fromkeys(boards):
        for ip in templates:
            big = grown(ip, board)
            if big is not None and _shape(big) not in shapes:
                shapes.add(_shape(big))
                out.append(big)
    return out

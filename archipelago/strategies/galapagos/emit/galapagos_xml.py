"""Galapagos middleware inputs for one cluster: the logical file (its kernels) and the map
file (which node, i.e. FPGA, runs which kernels), in the XML the middleware reads with
xmltodict (`cluster.py` of the Galapagos repository: `<kernel>` text is the IP name, with
num, rep, clk, aresetn, s_axis/m_axis; `<node>` has type, board, comm, kernel, mac, ip).
Written as text with escaped values: thousands of kernels per build."""

from xml.sax.saxutils import escape

from archipelago.strategies.galapagos.gmi import Node
from archipelago.strategies.galapagos.plan import DataflowPlan, KernelCluster

# AXI-Stream fields of a Galapagos packet: 512-bit data (64-byte flits, seeds/000 §8.2.2),
# keep and last, an 8-bit dest (256 kernels per cluster, §4), an 8-bit id (the sender),
# 17 user bits of which bit 16 marks an inter-cluster message (§4, Fig. 4).
PACKET_FIELDS = {"data": 512, "keep": 1, "last": 1, "dest": 8, "id": 8, "user": 17}
COMM = "udp"  # the 100G UDP core (GULF-Stream) of seeds/000 §2.1
HEADER = '<?xml version="1.0" encoding="UTF-8"?>\n'


def ip_name(kernel: str) -> str:
    """The HLS IP of a kernel: its plan name made a valid identifier."""
    return kernel.replace(".", "_")


def _text(value: object) -> str:
    text = str(value)
    return escape(text) if any(c in text for c in "&<>") else text


def _leaf(tag: str, value: object, indent: str) -> str:
    return f"{indent}<{tag}>{_text(value)}</{tag}>\n"


def _port(tag: str, name: str) -> str:
    return (f"    <{tag}>\n{_leaf('scope', 'global', '      ')}"
            f"{_leaf('name', name, '      ')}    </{tag}>\n")


def logical_xml(members: list[Node]) -> str:
    """`members`: the cluster's kernels in kernel-ID order."""
    parts = [HEADER, "<cluster>\n  <packet>\n"]
    parts += [_leaf(field, bits, "    ") for field, bits in PACKET_FIELDS.items()]
    parts.append("  </packet>\n")
    for node in members:
        parts.append(f"  <kernel>{_text(ip_name(node.name))}\n")
        for tag, value in (("vendor", "xilinx.com"), ("lib", "hls"), ("version", "1.0"),
                           ("num", node.kernel_id), ("rep", 1), ("clk", "ap_clk"),
                           ("aresetn", "ap_rst_n")):
            parts.append(_leaf(tag, value, "    "))
        parts += [_port("s_axis", "in_r"), _port("m_axis", "out_r"), "  </kernel>\n"]
    parts.append("</cluster>\n")
    return "".join(parts)


def map_xml(plan: DataflowPlan, cluster: KernelCluster, members: list[Node]) -> str:
    """One hardware node per FPGA; virtual kernels are listed with their gateway's node."""
    by_fpga: dict[int, list[int]] = {f: [] for f in cluster.fpgas}
    for node in members:
        by_fpga[node.fpga].append(node.kernel_id)
    parts = [HEADER, "<cluster>\n"]
    for fpga, kernels in by_fpga.items():
        use = plan.fpgas[fpga]
        parts.append("  <node>\n")
        for tag, value in (("type", "hw"), ("board", use.device.key), ("comm", COMM)):
            parts.append(_leaf(tag, value, "    "))
        parts += [_leaf("kernel", k, "    ") for k in sorted(kernels)]
        parts += [_leaf("mac", use.mac, "    "), _leaf("ip", use.ip, "    "), "  </node>\n"]
    parts.append("</cluster>\n")
    return "".join(parts)

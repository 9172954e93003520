"""The Galapagos planner: the encoder unrolled into kernels (unroll.py), mapped onto FPGAs
(mapping.py) and wired into clusters by the Cluster Builder (builder.py)."""

from archipelago.errors import PartitionError
from archipelago.hardware.cluster import Cluster
from archipelago.models.spec import ModelSpec
from archipelago.strategies.galapagos.aie import AIEEngine
from archipelago.strategies.galapagos.builder import build_plan
from archipelago.strategies.galapagos.hls_stream import HLSStreamEngine
from archipelago.strategies.galapagos.kernel_design import StreamConfig
from archipelago.strategies.galapagos.plan import DataflowPlan
from archipelago.strategies.registry import feature_refusal


def _check_inputs(spec: ModelSpec, cluster: Cluster) -> None:
    if spec.is_decoder:
        raise PartitionError(f"strategy 'galapagos' builds encoders (I-BERT, BERT, RoBERTa); "
                             f"{spec.name} is a {spec.arch} decoder (try strategy 'dfx')")
    refused = feature_refusal(spec, "galapagos")
    if refused:
        raise PartitionError(refused)
    device = cluster.require_identical("galapagos")
    if device.kind != "fpga" or not device.resources.dsp:
        raise PartitionError(f"strategy 'galapagos' maps kernels onto FPGA fabric; "
                             f"'{device.key}' is a {device.kind} without DSPs")


def plan_galapagos(spec: ModelSpec, cluster: Cluster, config: StreamConfig,
                   workload: object) -> DataflowPlan:
    _check_inputs(spec, cluster)
    engine = AIEEngine(config) if cluster.devices[0].resources.aie else HLSStreamEngine(config)
    row_interval = engine.config.row_interval or engine.default_row_interval(spec)
    return build_plan(spec, cluster, engine, row_interval)

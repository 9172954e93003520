"""Galapagos (seeds/000): an encoder unrolled into streaming I-BERT kernels on clusters of
network-attached FPGAs, wired by GMI kernels through gateways.

    unroll    model -> compute kernels and the transfers between them (§7); on Versal
              (devices with AI Engines) matrix multiplies go to the AIEs (§9)
    mapping   kernels -> FPGAs (first fit under a cap), FPGAs -> Galapagos clusters
    builder   the Cluster Builder: gateways, GMI insertion, kernel IDs, routing tables (§4-6)
    plan      the DataflowPlan every consumer reads

The dataflow plan kind's consumers live here too, imported only when a command needs them:
    estimate  X, T, I per encoder by following rows through the kernels (§8)
    report    estimates, emulations and builds as JSON or tables
    page      the charts of `archi report` (plotly, imported only there)
    emit      the build files (Cluster Builder JSON, logical/map XML, routing tables)
    emulate   libGalapagos-style kernel threads and packet router, bit-exact to IBertModel
"""

from archipelago.errors import PartitionError
from archipelago.estimate.workload import parse_seq_len
from archipelago.hardware.cluster import Cluster
from archipelago.models.spec import ModelSpec
from archipelago.strategies.galapagos.aie import AIEEngine
from archipelago.strategies.galapagos.builder import build_plan
from archipelago.strategies.galapagos.hls_stream import HLSStreamEngine, StreamConfig
from archipelago.strategies.galapagos.plan import DataflowPlan
from archipelago.strategies.options import WorkloadOption, WorkloadType
from archipelago.strategies.registry import PlanKind, register, register_kind

__all__ = ["DataflowPlan", "plan_galapagos"]


ENCODER = WorkloadType("encoder", (
    WorkloadOption("seq_len", "tokens per sequence", "128", {"emulate": "16"}),),
    parse_seq_len)
# 128 is the GLUE-typical length the Galapagos encoder is built for (seeds/000 §2.3); a
# 16-token emulation keeps the transformers reference quick.
register_kind(PlanKind(
    "dataflow", ENCODER,
    estimator="archipelago.strategies.galapagos.estimate:estimate",
    report="archipelago.strategies.galapagos.report",
    emulator="archipelago.strategies.galapagos.emulate:emulate",
    writers="archipelago.strategies.galapagos.emit:write_feasible_build",
    page="archipelago.strategies.galapagos.page:page"))


def _check_inputs(spec: ModelSpec, cluster: Cluster) -> None:
    if spec.is_decoder:
        raise PartitionError(f"strategy 'galapagos' builds encoders (I-BERT, BERT, RoBERTa); "
                             f"{spec.name} is a {spec.arch} decoder (try strategy 'dfx')")
    device = cluster.require_identical("galapagos")
    if device.kind != "fpga" or not device.resources.dsp:
        raise PartitionError(f"strategy 'galapagos' maps kernels onto FPGA fabric; "
                             f"'{device.key}' is a {device.kind} without DSPs")


# `archi build` without --strategy; without --cluster, the 72 Sidewinders of seeds/000 §8.
@register("galapagos", "encoder as streaming I-BERT kernels on clusters of clusters, GMI "
                       "collectives, Cluster Builder files (seeds/000)", "dataflow", StreamConfig,
          default_for=("build",), default_cluster="72xsidewinder")
def plan_galapagos(spec: ModelSpec, cluster: Cluster, config: StreamConfig,
                   workload: object) -> DataflowPlan:
    _check_inputs(spec, cluster)
    engine = AIEEngine(config) if cluster.devices[0].resources.aie else HLSStreamEngine(config)
    row_interval = engine.config.row_interval or engine.default_row_interval(spec)
    return build_plan(spec, cluster, engine, row_interval)

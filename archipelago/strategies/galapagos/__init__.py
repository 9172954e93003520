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

This module is the kind's registration; the planner (planner.py) and its engine config
(kernel_design.py) are named as paths, imported when the strategy plans.
"""

from archipelago.models.features import BIASES, EMBEDDING_NORM, POST_NORM
from archipelago.strategies.options import WorkloadOption, WorkloadType
from archipelago.strategies.registry import PlanKind, register, register_kind

ENCODER = WorkloadType("encoder", (
    WorkloadOption("seq_len", "tokens per sequence", "128", {"emulate": "16"}),),
    "archipelago.estimate.workload:parse_seq_len")
# 128 is the GLUE-typical length the Galapagos encoder is built for (seeds/000 §2.3); a
# 16-token emulation keeps the transformers reference quick.
register_kind(PlanKind(
    "dataflow", ENCODER,
    estimator="archipelago.strategies.galapagos.estimate:estimate",
    report="archipelago.strategies.galapagos.report",
    emulator="archipelago.strategies.galapagos.emulate:emulate",
    writers="archipelago.strategies.galapagos.emit:write_feasible_build",
    page="archipelago.strategies.galapagos.page:page",
    floors="archipelago.strategies.galapagos.floors:floors",
    utilization="archipelago.strategies.galapagos.utilization:utilization",
    supports=frozenset({BIASES, POST_NORM, EMBEDDING_NORM})))  # BERT's block, as I-BERT's


# `archi build` without --strategy; without --cluster, the 72 Sidewinders of seeds/000 §8.
register("galapagos", "encoder as streaming I-BERT kernels on clusters of clusters, GMI "
                      "collectives, Cluster Builder files (seeds/000)", "dataflow",
         "archipelago.strategies.galapagos.kernel_design:StreamConfig",
         default_for=("build",), default_cluster="72xsidewinder",
         design_space="archipelago.strategies.galapagos.space:galapagos",
         )("archipelago.strategies.galapagos.planner:plan_galapagos")

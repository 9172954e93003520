"""The cost models only the tensor-parallel kind uses: the DFX core (dfx.py), LORA's systolic
core (systolic.py, its configs and design-search variants in systolic_config.py), the two
papers' FPGA routers (router.py) and how much of a collective shows on the critical path
(overlap.py). They import the plan types and planning/heads.py, nothing above them."""

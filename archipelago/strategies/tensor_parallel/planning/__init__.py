"""The tensor-parallel kind's planning building blocks, public so that a new synchronization
scheme is one module plus one `register_scheme`: how heads split (heads.py), which board holds
which weight shard (shards.py), the schemes as data (sync.py, sync_schemes.py), experts'
placement (experts.py), the tensor x pipeline split (stages.py) and the one-ring refusal of
hooks that run one ring program (rings.py). They import only the plan types (plan.py,
staged.py); the planner (planner.py) assembles them."""

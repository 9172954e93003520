"""`archi compare`: which devices, how many, and which strategy, for a model and a service.

request (the options, checked) -> combos (which strategies apply, each combination planned
and estimated through the pipeline) -> run (on Dask, into a resumable journal whose records
record.py checks when read back) -> rows (cost and energy, refusals grouped) -> rank (order,
Pareto front, latency target) -> summary (`--json`), table (the console), page
(`--report`)."""

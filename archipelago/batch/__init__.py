"""Batch work that many processes share: `journal` keeps results in one append-only file
that concurrent and killed runs cannot corrupt (so an interrupted run resumes where it
stopped), and `workers` runs tasks on Dask's distributed scheduler and hands each result
back as it finishes. Neither knows what the tasks are (comparisons, search trials)."""

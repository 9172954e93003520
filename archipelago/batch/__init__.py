"""Batch work that many processes share: `journal` keeps results in one append-only file
that concurrent and killed runs cannot corrupt (so an interrupted run resumes where it
stopped), `workers` runs tasks on Dask's distributed scheduler and hands each result
back as it finishes, and `runner` picks that or a loop in this process (the default).
None of them knows what the tasks are (comparisons, search trials).

A resumable run, `evaluate` a module-level function of one task::

    journal = Journal.open(path, "compare", identity, labels)
    done = journal.records()
    todo = {key: task for key, task in tasks.items() if key not in done}
    with runner(workers, scheduler) as run, journal.buffered() as add:
        run(evaluate, todo, add, progress="comparing")
    results = journal.records()
"""

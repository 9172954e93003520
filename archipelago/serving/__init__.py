"""Serving: requests arriving at a rate, batches formed by a scheduler, replicas behind a
router, over any text-generation plan whose kind has a `serving` hook (its iteration times,
estimate/iteration.py). `requests` makes the arrivals and lengths, `replica` runs one
replica's policy, `simulate` routes requests to replicas, `metrics` reads the outcome and
searches the capacity, `command` is `archi serve` behind its options."""

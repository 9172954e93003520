"""Archipelago as a Python library (docs/python.md): the calls, their typed results and the
enums of the registries' names, exported lazily at the package top (`archipelago.plan`)."""

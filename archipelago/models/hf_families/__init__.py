"""The built-in transformer families, one module each (a module may register a family's
close variants beside it): its config reader, the features its models may use, the config
fields transformers builds from that are validated, and its state-dict names. Importing a
module registers it (`models.model_families`)."""

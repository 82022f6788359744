"""DCQCN tuning on the host: the parameter vocabulary, the trees that hold it, the journaled applier,
and the service and command that run :mod:`cc.tuner` against this host's NICs (docs/tuning.md)."""

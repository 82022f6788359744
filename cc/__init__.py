"""cc: DCQCN congestion-control models for netd. Pure Python + numpy; imports nothing from netd.

Four subpackages, each importing only those before it: :mod:`cc.model` (the DCQCN rules, their
parameters and what a host observes), :mod:`cc.sim` (the fabric simulator), :mod:`cc.tune` (the
online tuner and its search) and :mod:`cc.bench` (the benchmark, ``python -m cc.bench``).
"""

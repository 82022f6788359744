"""cc: DCQCN congestion-control models for netd. Pure Python + numpy; imports nothing from netd."""

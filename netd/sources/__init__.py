"""Counter sources. Each takes its root as an argument and returns frozen values from netd.model."""

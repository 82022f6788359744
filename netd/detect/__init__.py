"""Fabric anomaly detection: detectors as pure state machines over counter deltas, and their engine.

Layering (DESIGN §2): this package imports only :mod:`netd.model`, the standard library and pydantic.
The composition root turns observations into :class:`netd.detect.inputs.DetectInput` values
(``netd.detect_feed``) and publishes the engine's :class:`netd.detect.findings.AnomalyState`.
Kept empty on purpose: ``netd.config`` imports :mod:`netd.detect.settings`, which must stay cheap.
"""

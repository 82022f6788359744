"""Congestion: scores in [0, 1] with hysteresis levels per port, ToR and spine.

``score`` is the model (components to a score), ``scorer`` the levels over time, ``host`` this
host's inputs from an observation, ``scheduling`` the per-node state the scheduler extender reads.
"""

from netd import public_face

__all__, __getattr__, __dir__ = public_face(
    __name__,
    {
        "score": ("SIGNALS", "Components", "Ramp", "ScoreModel", "aggregate"),
        "scorer": ("LEVELS", "CongestionReport", "CongestionScorer", "Levels", "ScoreInput", "ScopeScore"),
        "host": ("components", "host_inputs", "scorer_from_config"),
        "scheduling": ("MAX_PRIORITY", "NodeIndex", "NodeState", "UnknownPolicy"),
    },
)

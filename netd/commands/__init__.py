"""The ``netd`` commands of the core: ``run`` (the daemon's composition root), ``status``,
``check``, ``anomalies``, ``flows``, and their terminal tables. Commands of a feature live in
that feature's ``cli.py``; :mod:`netd.cli` lists them all.
"""

from netd import public_face

__all__, __getattr__, __dir__ = public_face(
    __name__,
    {
        "run": ("FabricChoice", "banner", "build_daemon", "choose_fabric", "serve"),
        "status": ("collect_locally", "fetch_from_daemon", "status_source"),
        "check": ("CheckLine", "run_checks"),
    },
)

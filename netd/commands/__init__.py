"""The CLI's own commands — `netd status`, `netd check`, `netd anomalies`, `netd flows`,
`netd fabric` — and what they share: the client for a running daemon's API
(:mod:`netd.commands.daemon_client`) and the terminal tables they print. `netd run` and the argument
parser are :mod:`netd.cli` (the composition root); commands that belong to one feature live with it
(`netd tune` in :mod:`netd.tuning`, `netd nccl-env` in :mod:`netd.hints`, `netd lab` in
:mod:`netd.lab`).
"""

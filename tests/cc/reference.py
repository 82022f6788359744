"""The numpy DCQCN rules (:mod:`cc.model.dcqcn`) behind the engine's rules interface, so a test can
run the simulator on the reference and on the compiled kernel (:mod:`cc.sim.kernel`) and compare."""

from __future__ import annotations

import numpy as np

from cc.model import NpState, ParamBatch, RpState, np_step, rp_step


class NumpyRules:
    """:class:`cc.sim.kernel.DcqcnRules` over :func:`cc.model.dcqcn.np_step` and ``rp_step``."""

    def __init__(self, params: ParamBatch) -> None:
        self.params = params
        self._wide = params

    def _widened(self, columns: int) -> ParamBatch:
        if self._wide.rp_ai_rate.shape[1] != columns:
            self._wide = self.params.widened(columns)
        return self._wide

    def np_step(self, state: NpState, ce: np.ndarray, dt_us: float) -> np.ndarray:
        return np_step(state, ce, dt_us, self._widened(ce.shape[1]))

    def rp_step(
        self, state: RpState, cnps: np.ndarray, sent: np.ndarray, dt_us: float, line: np.ndarray
    ) -> None:
        rp_step(state, cnps, sent, dt_us, self._widened(cnps.shape[1]), line)

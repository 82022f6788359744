"""Several DCQCN operating points at once, as arrays the rules of :mod:`cc.model.dcqcn` broadcast over.

The simulator evaluates a batch of candidate parameter sets over the same topology and traffic in
one pass: every state array gets a leading batch axis, and every parameter becomes a ``(batch, 1)``
column, so row b of the state runs with ``params[b]``. A tuner asking "which of these 16 settings is
best here?" pays for one simulation with 16x wider arrays instead of 16 simulations, which is where
numpy's per-call overhead stops dominating.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import fields

import numpy as np
from numpy.typing import NDArray

from cc.model.params import DcqcnParams

__all__ = ["ParamBatch"]

Column = NDArray[np.float64]


class ParamBatch:
    """``DcqcnParams`` fields as ``(batch, 1)`` float columns, plus the derived values the rules read."""

    rp_ai_rate: Column
    rp_hai_rate: Column
    rp_time_reset: Column
    rp_byte_reset: Column
    rp_threshold: Column
    rp_gd: Column
    rp_min_dec_fac: Column
    rp_min_rate: Column
    rp_rate_reduce_monitor_period: Column
    rp_dce_tcp_g: Column
    rp_dce_tcp_rtt: Column
    rp_initial_alpha_value: Column
    rp_rate_to_set_on_first_cnp: Column
    rp_clamp_tgt_rate: Column
    rp_clamp_tgt_rate_ati: Column
    np_min_time_between_cnps: Column
    kmin_bytes: Column
    kmax_bytes: Column
    pmax: Column
    xoff_bytes: Column
    xon_bytes: Column

    def __init__(self, params: Sequence[DcqcnParams]) -> None:
        if not params:
            raise ValueError("a ParamBatch needs at least one DcqcnParams")
        self.params = tuple(params)
        for f in fields(DcqcnParams):
            column = np.array([[float(getattr(p, f.name))] for p in self.params])
            setattr(self, f.name, column)
        # Same formulas as the DcqcnParams properties, evaluated per row.
        self.g = (1024.0 - self.rp_dce_tcp_g) / 1024.0
        self.cut_scale = 2.0 ** (10.0 - self.rp_gd)
        self.min_keep = self.rp_min_dec_fac / 100.0
        self.initial_alpha = self.rp_initial_alpha_value / 1024.0
        self.ecn_enabled = self.pmax > 0

    def widened(self, columns: int) -> ParamBatch:
        """The same parameter sets with every column repeated to ``(batch, columns)``.

        Values are unchanged; only the shape is. The rules run over ``(batch, flows)`` state, and a
        numpy operation costs about twice as much when it broadcasts a ``(batch, 1)`` operand along
        the short inner axis as when both operands have the same shape.
        """
        wide = copy.copy(self)
        for name, value in vars(self).items():
            if isinstance(value, np.ndarray) and value.shape == (len(self), 1):
                setattr(wide, name, np.ascontiguousarray(np.broadcast_to(value, (len(self), columns))))
        return wide

    def __len__(self) -> int:
        return len(self.params)

    def __getitem__(self, index: int) -> DcqcnParams:
        return self.params[index]

    @classmethod
    def of(cls, params: DcqcnParams | Sequence[DcqcnParams] | ParamBatch) -> ParamBatch:
        if isinstance(params, ParamBatch):
            return params
        if isinstance(params, DcqcnParams):
            return cls((params,))
        return cls(params)

"""``/v1/qos``: this host's QoS as each NIC applies it; ``/v1/qos/fabric``: the fabric consistency audit.

Both are reads (open, like every read). ``/v1/qos`` is served by ``netd run`` (404 from ``netd fabric``,
which has no ports of its own); ``/v1/qos/fabric`` by ``netd fabric`` (from Prometheus) and by
``netd run`` on the emulated fabric (from the emulated hosts' trees).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from netd.qos.fabric import FabricQos
from netd.qos.service import QosService

__all__ = ["fabric_qos_router", "qos_router"]


def qos_router(service: QosService) -> APIRouter:
    router = APIRouter(prefix="/v1/qos", tags=["qos"])

    @router.get("")
    def qos() -> dict[str, Any]:
        """Every RDMA port's trust, DSCP map, PFC, ETS, buffers, ECN/DCQCN per priority, MTU, RoCE mode,
        GID index and DCQCN parameters; what could not be read and why; local inconsistencies."""
        return service.document()

    return router


def fabric_qos_router(fabric: FabricQos) -> APIRouter:
    router = APIRouter(prefix="/v1/qos", tags=["qos"])

    @router.get("/fabric")
    def qos_fabric() -> dict[str, Any]:
        """The expected profile per scope (declared in [qos] expected, else the majority), one finding
        per host that differs with each difference and the command to fix it, and settings without
        a majority."""
        return fabric.document()

    return router

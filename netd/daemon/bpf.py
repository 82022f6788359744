"""Composition of the eBPF probes: the [bpf] configuration → settings → a running source.

Called by the daemon at start (docs/architecture.md: only the composition root turns configuration into
sources). When the probes cannot run (no bcc, no privileges, no headers, another netd owns them),
netd runs without them: the source it returns reports every probe as disabled with the reason, so
GET /v1/flows, the metrics and `netd check` say why.
"""

from __future__ import annotations

import logging

from netd.config.settings import Config
from netd.errors import SourceError
from netd.model.bpf import BpfSample
from netd.sources.bpf import BpfSettings, BpfSource, UnavailableBpfSource
from netd.sources.bpf_probes import probe_environment

__all__ = ["bpf_banner", "bpf_settings", "start_bpf"]

log = logging.getLogger(__name__)


def bpf_settings(cfg: Config) -> BpfSettings:
    b = cfg.bpf
    return BpfSettings(
        interfaces=b.interfaces,
        directions=tuple(b.directions),
        roce=b.roce,
        pfc=b.pfc,
        tcp_retransmits=b.tcp_retransmits,
        rdma_events=b.rdma_events,
        tcp_attach=b.tcp_attach,
        roce_port=b.roce_port,
        flow_table_size=b.flow_table_size,
        flow_cache_slots=b.flow_cache_slots,
        tcp_table_size=b.tcp_table_size,
        flow_scan_interval_s=b.flow_scan_interval,
        run_stats=b.run_stats,
        state_file=b.state_file,
    )


def start_bpf(cfg: Config) -> BpfSource | None:
    """The probes' source, or None when [bpf] is not enabled."""
    if not cfg.bpf.enabled:
        return None
    settings = bpf_settings(cfg)
    env = probe_environment()
    if not env.can_load:
        reason = "; ".join(env.problems)
        log.warning("eBPF probes not loaded: %s", reason)
        return UnavailableBpfSource(reason, settings)
    from netd.sources.bpf_bcc import BccBpfSource  # needs bcc: imported only when it can load

    try:
        return BccBpfSource(settings, env)
    except SourceError as exc:
        reason = str(exc).removeprefix("bpf: ")
        log.warning("eBPF probes not loaded: %s", reason)
        return UnavailableBpfSource(reason, settings)


def bpf_banner(sample: BpfSample | None, url: str) -> list[str]:
    """The `netd run` banner's line about the probes (none when [bpf] is not enabled)."""
    if sample is None:
        return []
    states = ", ".join(
        f"{p.probe} {p.state}" + (f" ({p.attach})" if p.attached and p.attach else "") for p in sample.probes
    )
    return [f"  eBPF probes: {states}. Flows: {url}/v1/flows or `netd flows`; details: `netd check`."]

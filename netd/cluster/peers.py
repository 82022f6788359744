"""Where a pod group already runs, for the scheduler extender's peer affinity: kube-state-metrics
series in the cluster's Prometheus (``kube_pod_labels`` joined with ``kube_pod_info``), asked on the
request path and cached per group for one refresh interval. Asked by the listener's process itself
(not netd fabric's view process): a request waits for the answer."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping

from netd.config.service import ClusterConfig
from netd.errors import NetdError
from netd.sources.prometheus import PrometheusClient, promql_string

__all__ = ["GroupPeers", "kube_label_name"]

log = logging.getLogger(__name__)
MAX_GROUPS = 4096  # many short-lived groups must not grow memory


def kube_label_name(label: str) -> str:
    """kube-state-metrics' name for a Kubernetes label key: ``label_`` + the key with non-[a-zA-Z0-9_]
    characters replaced by ``_``."""
    return "label_" + re.sub(r"[^a-zA-Z0-9_]", "_", label)


class GroupPeers:
    def __init__(self, cfg: ClusterConfig, client: PrometheusClient) -> None:
        self.cfg, self.client = cfg, client
        self._cache: dict[tuple[str, str], tuple[float, Mapping[str, int] | None]] = {}

    def __call__(self, label: str, group: str) -> Mapping[str, int] | None:
        """Nodes running pods of ``group`` (kube-state-metrics needs ``--metric-labels-allowlist`` for
        the label); None when Prometheus cannot say."""
        key = (label, group)
        cached = self._cache.get(key)
        now = time.monotonic()
        if cached is not None and now - cached[0] < self.cfg.refresh_interval:
            return cached[1]
        query = (
            f'count by (node) ({self.cfg.pod_info_metric}{{node!=""}} * on (namespace, pod) group_left() '
            f"{self.cfg.pod_labels_metric}{{{kube_label_name(label)}={promql_string(group)}}})"
        )
        try:
            # on the scheduler's request path: never wait long (kube-scheduler gives extenders 5 s)
            rows = self.client.query(query, timeout_s=min(self.cfg.query_timeout, 1.0))
            found: Mapping[str, int] | None = {
                labels["node"]: int(v) for labels, v in rows if labels.get("node")
            }
        except NetdError as exc:
            log.warning("pod-group peers of %s=%s unavailable: %s", label, group, exc)
            found = None
        if len(self._cache) > MAX_GROUPS:
            self._cache.clear()
        self._cache[key] = (now, found)
        return found

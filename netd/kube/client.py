"""The few Kubernetes API calls the publisher makes, over the official client's ``ApiClient``.

The official ``kubernetes`` package supplies what a hand-written client would get wrong: kubeconfig
and in-cluster service-account loading, TLS, token refresh, proxies. netd calls the REST paths
directly (``param_serialize`` + ``call_api``) because server-side apply of a CRD and a JSON patch
with a ``test`` operation have no typed method; the request shapes are the API server's own:

* apply: ``PATCH <path>?fieldManager=<m>&force=true`` with ``application/apply-patch+yaml`` (a JSON
  body is valid YAML);
* JSON patch: ``PATCH <path>`` with ``application/json-patch+json``;
* list by label, delete, get.

``dry_run`` adds ``dryRun=All`` to every write: the API server validates, admits and answers as
for a real write, and stores nothing.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from netd.errors import KubeError

__all__ = ["HYPERNODES", "KUEUE_TOPOLOGIES", "KubeClient", "node_path"]

HYPERNODES = "/apis/topology.volcano.sh/v1alpha1/hypernodes"
KUEUE_TOPOLOGIES = "/apis/kueue.x-k8s.io/v1beta1/topologies"


class KubeClient:
    def __init__(self, api: Any, dry_run: bool = False, timeout_s: float = 10.0) -> None:
        self.api = api  # kubernetes.client.ApiClient
        self.dry_run = dry_run
        self.timeout_s = timeout_s
        self.requests = 0

    @classmethod
    def from_environment(cls, kubeconfig: str | None, dry_run: bool = False) -> KubeClient:
        """In a pod: the service account; else ``kubeconfig`` (default ~/.kube/config, $KUBECONFIG)."""
        try:  # heavy, and only `netd fabric publish` needs it: the extra netd[kube]
            from kubernetes import client, config
        except ImportError as exc:
            raise KubeError("publishing needs the kubernetes client: pip install 'netd[kube]'") from exc

        try:
            if kubeconfig is None:
                try:
                    config.load_incluster_config()
                except config.ConfigException:
                    config.load_kube_config()
            else:
                config.load_kube_config(config_file=kubeconfig)
        except (config.ConfigException, OSError) as exc:
            raise KubeError(f"no Kubernetes credentials: {exc}") from exc
        return cls(client.ApiClient(), dry_run=dry_run)

    def _call(
        self, method: str, path: str, query: list[tuple[str, str]], body: Any = None, content_type: str = ""
    ) -> tuple[int, Any]:
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        if self.dry_run and method in ("PATCH", "POST", "PUT", "DELETE"):
            query = [*query, ("dryRun", "All")]
        params = self.api.param_serialize(
            method, path, query_params=query, header_params=headers, body=body, auth_settings=["BearerToken"]
        )
        self.requests += 1
        try:
            resp = self.api.call_api(*params, _request_timeout=self.timeout_s)
            raw = resp.read()
        except Exception as exc:  # urllib3/SSL errors: the API server is unreachable
            raise KubeError(f"{method} {path}: {exc}") from exc
        try:
            doc = json.loads(raw) if raw else None
        except ValueError:
            doc = None
        return resp.status, doc

    @staticmethod
    def _fail(method: str, path: str, status: int, doc: Any) -> KubeError:
        reason = doc.get("message") if isinstance(doc, dict) else None
        return KubeError(f"{method} {path}: HTTP {status}{': ' + reason if reason else ''}")

    def apply(self, path: str, obj: dict[str, Any], manager: str) -> Any:
        query = [("fieldManager", manager), ("force", "true")]
        status, doc = self._call("PATCH", path, query, json.dumps(obj), "application/apply-patch+yaml")
        if status >= 300:
            raise self._fail("PATCH", path, status, doc)
        return doc

    def json_patch(self, path: str, ops: list[dict[str, Any]], manager: str) -> bool:
        """True when applied; False when a ``test`` operation failed (someone else wrote first)."""
        query = [("fieldManager", manager)]
        status, doc = self._call("PATCH", path, query, ops, "application/json-patch+json")
        if status in (409, 422):
            return False
        if status >= 300:
            raise self._fail("PATCH", path, status, doc)
        return True

    def get(self, path: str) -> Any:
        status, doc = self._call("GET", path, [])
        if status == 404:
            return None
        if status >= 300:
            raise self._fail("GET", path, status, doc)
        return doc

    def list_names(self, path: str, selector: dict[str, str]) -> list[str]:
        query = [("labelSelector", ",".join(f"{k}={v}" for k, v in selector.items()))]
        status, doc = self._call("GET", path, query)
        if status == 404:  # the CRD is not installed: nothing of ours can exist
            return []
        if status >= 300:
            raise self._fail("GET", path, status, doc)
        return [item["metadata"]["name"] for item in (doc or {}).get("items", [])]

    def delete(self, path: str) -> None:
        status, doc = self._call("DELETE", path, [])
        if status >= 300 and status != 404:
            raise self._fail("DELETE", path, status, doc)

    def close(self) -> None:
        self.api.close()


def node_path(name: str, subresource: str = "") -> str:
    return f"/api/v1/nodes/{quote(name, safe='')}" + (f"/{subresource}" if subresource else "")

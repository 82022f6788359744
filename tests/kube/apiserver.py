"""A recorded transport at the HTTP boundary: stands in for urllib3's PoolManager inside the official
client's ApiClient, records every request as sent (method, path, query, headers, body) and answers
like kube-apiserver for the few calls the publisher makes.

The answers follow the API's documented behaviour: server-side apply creates or merges an object
(labels and conditions are maps/keyed lists, so another manager's entries survive), answers with
the object and a new resourceVersion; ``dryRun=All`` answers the same and stores nothing; a JSON
patch whose ``test`` fails answers 422; list honours ``labelSelector`` equality terms.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import urllib3


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any


def _merge(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    out = dict(old)
    for k, v in new.items():
        if k == "conditions" and isinstance(v, list):
            by_type = {c["type"]: c for c in out.get(k, [])}
            by_type.update({c["type"]: c for c in v})
            out[k] = list(by_type.values())
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


class FakeApiServer:
    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.requests: list[Request] = []
        self.version = 100
        self.missing_paths: set[str] = set()  # e.g. a CRD that is not installed: 404

    def add(self, path: str, obj: dict[str, Any]) -> None:
        self.version += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.version)
        self.objects[path] = obj

    def writes(self) -> list[Request]:
        return [r for r in self.requests if r.method != "GET"]

    def _answer(self, status: int, doc: Any) -> urllib3.HTTPResponse:
        return urllib3.HTTPResponse(
            body=json.dumps(doc).encode(), status=status, headers={"Content-Type": "application/json"}
        )

    # urllib3.PoolManager.request, as kubernetes.client.rest calls it
    def request(self, method: str, url: str, body: Any = None, headers: Any = None, **_: Any) -> Any:
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query))
        doc = json.loads(body) if body else None
        self.requests.append(Request(method, parts.path, query, dict(headers or {}), doc))
        path = parts.path
        if any(path.startswith(m) for m in self.missing_paths):
            return self._answer(
                404, {"kind": "Status", "message": "the server could not find the requested resource"}
            )
        dry = query.get("dryRun") == "All"
        if method == "GET":
            if path in self.objects:
                return self._answer(200, self.objects[path])
            selector = dict(t.split("=") for t in query.get("labelSelector", "").split(",") if t)
            items = [
                o
                for p, o in self.objects.items()
                if p.rsplit("/", 1)[0] == path
                and all(o["metadata"].get("labels", {}).get(k) == v for k, v in selector.items())
            ]
            if items or "labelSelector" in query:
                return self._answer(200, {"kind": "List", "items": items})
            return self._answer(404, {"kind": "Status", "message": "not found"})
        if method == "DELETE":
            if path not in self.objects:
                return self._answer(404, {"kind": "Status", "message": "not found"})
            if not dry:
                del self.objects[path]
            return self._answer(200, {"kind": "Status", "status": "Success"})
        if method == "PATCH" and headers["Content-Type"] == "application/apply-patch+yaml":
            base = path.removesuffix("/status")
            merged = _merge(self.objects.get(base, {}), doc)
            if not dry:
                self.add(base, merged)
            return self._answer(200, merged)
        if method == "PATCH" and headers["Content-Type"] == "application/json-patch+json":
            obj = json.loads(json.dumps(self.objects[path]))
            for op in doc:
                keys = op["path"].strip("/").split("/")
                target = obj
                for k in keys[:-1]:
                    target = target.setdefault(k, {})
                if op["op"] == "test" and target.get(keys[-1]) != op["value"]:
                    return self._answer(422, {"kind": "Status", "message": "the test operation failed"})
                if op["op"] in ("add", "replace"):
                    target[keys[-1]] = op["value"]
            if not dry:
                self.add(path, obj)
            return self._answer(200, obj)
        return self._answer(405, {"kind": "Status", "message": f"{method} not handled"})

    def clear(self) -> None:
        pass

"""The Kubernetes scheduler-extender wire format (k8s.io/kube-scheduler/extender/v1), as pydantic models.

kube-scheduler marshals these Go structs without JSON tags, so the fields are PascalCase:
``{"Pod": {...}, "Nodes": {"items": [...]} | null, "NodeNames": [...] | null}``. With
``nodeCacheCapable: true`` it sends ``NodeNames`` and expects ``NodeNames`` back; otherwise it sends the
full ``v1.NodeList`` and expects the passing ``v1.Node`` objects back unchanged. Go's decoder matches
field names case-insensitively, so some extenders' clients send ``nodenames``; netd accepts any case
and always answers in the canonical PascalCase. The Pod and Node objects keep every field they carry.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["ExtenderArgs", "ExtenderFilterResult", "HostPriority", "NodeList", "PodObject"]

_CANONICAL = {name.lower(): name for name in ("Pod", "Nodes", "NodeNames")}
_LIST_CANONICAL = {name.lower(): name for name in ("apiVersion", "kind", "metadata", "items")}


class ObjectMeta(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class PodObject(BaseModel):
    """A ``v1.Pod``; netd reads only its metadata (name, namespace, labels, annotations)."""

    model_config = ConfigDict(extra="allow")
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    def group(self, label: str) -> str | None:
        """The pod group this pod belongs to: the label, or an annotation of the same key."""
        m = self.metadata
        return (m.labels or {}).get(label) or (m.annotations or {}).get(label) or None


class NodeList(BaseModel):
    """A ``v1.NodeList``; ``items`` are echoed back exactly as received."""

    model_config = ConfigDict(extra="allow")
    items: list[dict[str, Any]] = Field(
        default_factory=list,
        description="v1.Node objects",
        json_schema_extra={
            "items": {
                "type": "object",
                "required": ["metadata"],
                "properties": {
                    "metadata": {
                        "type": "object",
                        "required": ["name"],
                        "properties": {"name": {"type": "string", "minLength": 1}},
                    }
                },
            }
        },
    )

    @model_validator(mode="before")
    @classmethod
    def _any_case(cls, data: Any) -> Any:  # as Go decodes a v1.NodeList's tagged fields
        if isinstance(data, dict):
            canonical = _LIST_CANONICAL
            return {canonical.get(k.lower(), k) if isinstance(k, str) else k: v for k, v in data.items()}
        return data

    @field_validator("items")
    @classmethod
    def _named(cls, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for i, node in enumerate(items):
            meta = node.get("metadata")
            if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
                raise ValueError(f"items[{i}] has no metadata.name")
        return items

    def names(self) -> list[str]:
        return [str(n["metadata"]["name"]) for n in self.items]


class ExtenderArgs(BaseModel):
    model_config = ConfigDict(
        extra="ignore",
        json_schema_extra={  # one of the two node lists must be given (not null)
            "anyOf": [
                {"required": ["Nodes"], "properties": {"Nodes": {"type": "object"}}},
                {"required": ["NodeNames"], "properties": {"NodeNames": {"type": "array"}}},
            ]
        },
    )
    Pod: PodObject
    Nodes: NodeList | None = None
    NodeNames: list[str] | None = Field(None, max_length=100_000)

    @model_validator(mode="before")
    @classmethod
    def _any_case(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {_CANONICAL.get(k.lower(), k) if isinstance(k, str) else k: v for k, v in data.items()}
        return data

    @model_validator(mode="after")
    def _has_nodes(self) -> ExtenderArgs:
        if self.Nodes is None and self.NodeNames is None:
            raise ValueError("ExtenderArgs needs Nodes (nodeCacheCapable: false) or NodeNames (true)")
        return self

    def candidates(self) -> list[str]:
        return self.NodeNames if self.NodeNames is not None else (self.Nodes.names() if self.Nodes else [])


class ExtenderFilterResult(BaseModel):
    Nodes: NodeList | None = None
    NodeNames: list[str] | None = None
    FailedNodes: dict[str, str] = Field(default_factory=dict)
    FailedAndUnresolvableNodes: dict[str, str] = Field(default_factory=dict)
    Error: str = ""


class HostPriority(BaseModel):
    Host: str
    Score: int = Field(ge=0, le=10)

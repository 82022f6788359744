"""The `[kube]` keys and defaults the docs show are the code's."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from netd.config.kube import KubeConfig

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.mark.parametrize("doc", ["configuration.md", "deploy.md"])
def test_docs_list_every_kube_key_with_its_default(doc: str):
    text = (DOCS / doc).read_text()
    block = re.search(r"^\[kube\][^\n]*\n(.*?)^(?:```|\[)", text, re.MULTILINE | re.DOTALL)
    assert block, f"{doc} has no [kube] block"
    assert tomllib.loads(block.group(1)) == KubeConfig().model_dump()

"""The documentation says what the code does: [detect] defaults, every kind, every metric."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from netd.config.detect import DetectConfig
from netd.exporter.anomalies import KINDS

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_configuration_md_lists_every_detect_key_with_its_default() -> None:
    text = (DOCS / "configuration.md").read_text()
    block = text[text.index("[detect]\nenabled") :]
    documented = tomllib.loads(block[: block.index("```")])["detect"]
    defaults = DetectConfig().model_dump()
    assert set(documented) == set(defaults)
    for key, value in documented.items():
        assert (tuple(value) if isinstance(value, list) else value) == defaults[key], key


def test_detection_md_describes_every_kind_and_metrics_md_lists_it() -> None:
    detection = (DOCS / "detection.md").read_text()
    metrics = (DOCS / "metrics.md").read_text()
    for kind in KINDS:
        assert re.search(rf"^### .*`{kind}`", detection, re.M), kind
        assert f"`{kind}`" in metrics, kind

"""The layer rule of docs/architecture.md holds for every module of netd and cc, with no exception."""

from __future__ import annotations

import importlib
import types
from pathlib import Path

import pytest

from tests.layering import Layers, check_module, check_tree, parse_layers

REPO = Path(__file__).resolve().parent.parent
LAYERS = parse_layers((REPO / "docs" / "architecture.md").read_text())


def test_every_import_follows_the_documented_layers() -> None:
    violations = check_tree(REPO, LAYERS)
    assert not violations, "\n".join(map(str, violations))


def test_every_package_on_disk_has_a_row() -> None:
    packages = {".".join(p.parent.relative_to(REPO).parts) for p in REPO.glob("netd/*/__init__.py")}
    packages |= {".".join(p.parent.relative_to(REPO).parts) for p in REPO.glob("cc/*/__init__.py")}
    assert packages <= set(LAYERS.rows), sorted(packages - set(LAYERS.rows))
    assert not list(REPO.glob("netd/*.py")) or {p.stem for p in REPO.glob("netd/*.py")} <= {
        "__init__",
        "__main__",
        "cli",
        "errors",
    }


# The checker itself, on made-up modules: each case must be caught (or let through) for its reason.
TOY = Layers(
    {
        "netd": 0,
        "netd.model": 0,
        "netd.sources": 2,
        "netd.detect": 4,
        "netd.topology": 4,
        "netd.api": 8,
        "netd.commands": 11,
        "cc": 0,
        "cc.model": 0,
        "cc.sim": 1,
    }
)

CASES = [
    # (module, source, expected reasons: substrings, empty when allowed)
    ("netd.detect.pfc", "from netd.model.snapshot import PortSample", []),
    ("netd.detect.pfc", "from netd.detect.base import Detector", []),
    ("netd.detect.pfc", "from netd import __version__", []),
    ("netd.detect.pfc", "import numpy\nfrom cc.sim.engine import step", []),
    ("netd.sources.rdma", "from netd.detect.findings import Finding", ["higher row"]),
    ("netd.detect.pfc", "from netd.topology.build import build", ["same row"]),
    ("netd.detect.pfc", "def f():\n    from netd.api.app import create_app\n", ["higher row"]),
    ("netd.detect.pfc", "from netd.sources import rdma", []),
    ("netd.detect.pfc", "from netd.sources.rdma import _parse", ["private name"]),
    ("netd.detect.pfc", "import netd.sources.rdma as r\nr._parse('x')", ["private name"]),
    ("netd.detect.pfc", "from netd.detect.base import _helper", []),
    ("netd.api.cli", "from netd.commands.status import x", []),  # a cli module is a composition root
    ("netd.api.app", "from netd.commands.status import x", ["higher row"]),
    ("cc.sim.engine", "from cc.model.dcqcn import rp", []),
    ("cc.model.dcqcn", "from cc.sim.engine import step", ["higher row"]),
    ("cc.model.dcqcn", "from netd.model import Snapshot", ["never imports netd"]),
    ("netd.newpkg.x", "import os", ["no row"]),
    ("netd.detect.pfc", "from netd.nowhere import y", ["no row"]),
]


@pytest.mark.parametrize(("module", "source", "reasons"), CASES)
def test_the_checker_catches_each_kind_of_violation(module: str, source: str, reasons: list[str]) -> None:
    found = [v.why for v in check_module(source, module, TOY)]
    assert len(found) == len(reasons), found
    for why, reason in zip(found, reasons, strict=True):
        assert reason in why


def _packages() -> list[str]:
    inits = sorted(REPO.glob("netd/*/__init__.py")) + sorted(REPO.glob("cc/*/__init__.py"))
    return [".".join(p.parent.relative_to(REPO).parts) for p in inits]


@pytest.mark.parametrize("package", _packages())
def test_each_package_says_what_it_holds_and_names_its_public_face(package: str) -> None:
    module = importlib.import_module(package)
    assert module.__doc__ and len(module.__doc__) > 40
    public = module.__all__
    assert public and len(set(public)) == len(public)
    for name in public:
        value = getattr(module, name)
        assert value is not None and not isinstance(value, types.ModuleType), f"{package}.{name}"
    assert set(public) <= set(dir(module))

"""The layer rule of docs/architecture.md, checked from the AST (no import is executed).

The layer table is read from the document itself (between ``<!-- layers:begin -->`` and
``<!-- layers:end -->``), so the rule that CI enforces and the rule a contributor reads cannot drift.
Each row is ``| N | `pkg`, `pkg` | what |``: a module belongs to the longest listed package that
contains it (the root packages ``netd`` and ``cc`` list only their own ``__init__``). A module may import:

* any module of its own package;
* any package on a *lower* row of the same table (never one on its own row or above);
* ``cc`` from ``netd`` (a library below all of netd); never ``netd`` from ``cc``.

Modules named ``cli`` or ``__main__`` are composition roots (they build a command out of the
packages): they may import any package, and no other module may import them. No module imports a private name
(``_name``) of another package, neither by ``from x import _name`` nor as ``module._name``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Layers", "Violation", "check_module", "check_tree", "module_name", "parse_layers"]

_ROW = re.compile(r"^\|\s*(\d+)\s*\|([^|]*)\|")
_ROOTS = ("netd", "cc")
_COMPOSITION = ("cli", "__main__")


@dataclass(frozen=True)
class Violation:
    module: str
    line: int
    imported: str
    why: str

    def __str__(self) -> str:
        return f"{self.module}:{self.line}: imports {self.imported}: {self.why}"


@dataclass(frozen=True)
class Layers:
    """package -> row number, per root (``netd``, ``cc``)."""

    rows: Mapping[str, int]

    def unit(self, module: str) -> str | None:
        """The listed package that holds ``module`` (longest match), or None when none does."""
        best = None
        for pkg in self.rows:
            root_only = pkg in _ROOTS
            if module == pkg or (not root_only and module.startswith(pkg + ".")):
                if best is None or len(pkg) > len(best):
                    best = pkg
        return best

    def top(self, root: str) -> int:
        return max(n for p, n in self.rows.items() if p.split(".")[0] == root)

    def row(self, module: str) -> tuple[str, int] | None:
        unit = self.unit(module)
        if unit is None and module.endswith(".__main__"):
            unit = self.unit(module.removesuffix(".__main__"))
        if unit is None:
            return None
        if module.rsplit(".", 1)[-1] in _COMPOSITION:
            return unit, self.top(unit.split(".")[0]) + 1
        return unit, self.rows[unit]


def parse_layers(markdown: str) -> Layers:
    block = markdown.split("<!-- layers:begin -->", 1)[1].split("<!-- layers:end -->", 1)[0]
    rows: dict[str, int] = {}
    for line in block.splitlines():
        m = _ROW.match(line.strip())
        if m:
            for pkg in re.findall(r"`([a-z_.]+)`", m.group(2)):
                rows[pkg] = int(m.group(1))
    return Layers(rows)


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(tree: ast.AST, module: str, is_package: bool) -> Iterator[tuple[int, str, tuple[str, ...]]]:
    """(line, imported module, names taken from it) for every import, lazy ones included."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name, ()
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            yield node.lineno, target, tuple(a.name for a in node.names)


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def check_module(source: str, module: str, layers: Layers, *, is_package: bool = False) -> list[Violation]:
    me = layers.row(module)
    if me is None:
        return [Violation(module, 0, "-", "its package is in no row of the layer table")]
    my_unit, my_row = me
    my_root = my_unit.split(".")[0]
    tree = ast.parse(source)
    out: list[Violation] = []
    aliases: dict[str, str] = {}  # local name -> module of another package, for `module._name` checks
    for line, target, names in _imports(tree, module, is_package):
        if target.split(".")[0] not in _ROOTS:
            continue
        # `from pkg import submodule` imports the submodule: judge the most specific module named.
        submodules = {
            n: f"{target}.{n}"
            for n in names
            if layers.unit(f"{target}.{n}") not in (None, layers.unit(target))
        }
        for imported in list(submodules.values()) or [target]:
            out += _judge(module, my_unit, my_row, my_root, line, imported, layers)
        foreign = layers.unit(target) != my_unit
        for n in names:
            if foreign and n not in submodules and _private(n):
                out.append(Violation(module, line, f"{target}.{n}", "private name of another package"))
        for local, full in _bound_modules(tree, line):
            if layers.unit(full) not in (None, my_unit):
                aliases[local] = full
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and _private(node.attr)
        ):
            out.append(
                Violation(
                    module,
                    node.lineno,
                    f"{aliases[node.value.id]}.{node.attr}",
                    "private name of another package",
                )
            )
    return out


def _bound_modules(tree: ast.AST, line: int) -> Iterator[tuple[str, str]]:
    """(local name, module) for the names the import statement on ``line`` binds to modules."""
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) != line:
            continue
        if isinstance(node, ast.Import):
            yield from ((a.asname or a.name, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield from ((a.asname or a.name, f"{node.module}.{a.name}") for a in node.names)


def _judge(
    module: str, my_unit: str, my_row: int, my_root: str, line: int, imported: str, layers: Layers
) -> list[Violation]:
    root = imported.split(".")[0]
    if module.rsplit(".", 1)[-1] in _COMPOSITION and root == my_root:
        return []  # a composition root may use any package of its own root
    if root != my_root:
        if my_root == "cc":
            return [Violation(module, line, imported, "cc/ is a library: it never imports netd")]
        return []  # netd may use the cc library
    theirs = layers.row(imported)
    if theirs is None:
        return [Violation(module, line, imported, "its package is in no row of the layer table")]
    unit, row = theirs
    if unit == my_unit:
        return []
    if row >= my_row:
        where = "the same row as" if row == my_row else "a higher row than"
        return [Violation(module, line, imported, f"{unit} ({row}) is on {where} {my_unit} ({my_row})")]
    return []


def check_tree(repo: Path, layers: Layers, roots: Iterable[str] = _ROOTS) -> list[Violation]:
    out: list[Violation] = []
    for root in roots:
        for path in sorted((repo / root).rglob("*.py")):
            module = module_name(path, repo)
            out += check_module(path.read_text(), module, layers, is_package=path.name == "__init__.py")
    return out

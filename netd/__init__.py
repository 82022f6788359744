"""netd: per-host RoCE congestion-control and network telemetry daemon.

Each package's ``__init__`` is its public face: ``__all__`` names what other packages may use, and
:func:`public_face` resolves those names from the package's modules on first use, so importing a
package for one name (``from netd.api import daemon_get``) does not import all of it (FastAPI, bcc).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__version__ = "0.1.0"

__all__ = ["__version__", "public_face"]


def public_face(
    package: str, modules: Mapping[str, tuple[str, ...]]
) -> tuple[list[str], Callable[[str], Any], Callable[[], list[str]]]:
    """``__all__``, ``__getattr__`` and ``__dir__`` of a package whose names live in its modules.

    ``modules`` maps a module of the package to the names it contributes; a name is imported from
    its module the first time it is asked for (PEP 562), then cached on the package. A name may not
    be a module of the package too: once that module is imported, the attribute is the module.
    """
    where = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(where)

    return sorted(where), __getattr__, __dir__

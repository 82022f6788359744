"""Field types shared by the configuration sections."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import BeforeValidator

__all__ = ["OptionalPath", "SetPath"]


def _unset_when_empty(value: Any) -> Any:
    # `token_file = ""` is how docs/configuration.md shows an unset path, and what an operator copying
    # it writes; as a Path, "" would be "." (the working directory), set, and read as a file.
    return None if isinstance(value, str) and not value.strip() else value


# A path that may be left unset: None, or "" (and blanks) from TOML or a NETD_* variable.
OptionalPath = Annotated[Path | None, BeforeValidator(_unset_when_empty)]


def _not_blank(value: Any) -> Any:
    if isinstance(value, str) and not value.strip():
        # As a Path, "" is "." (the working directory): NETD_SYSFS_ROOT= from an unset template
        # variable would read counters from wherever netd was started.
        raise ValueError("a path cannot be empty (leave the key out for its default)")
    return value


# A path that always has a value: its default, or a non-blank path.
SetPath = Annotated[Path, BeforeValidator(_not_blank)]

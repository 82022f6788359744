"""What a test of the real lab needs: root, bcc for its data plane, and the tools it runs."""

from __future__ import annotations

import os
import shutil

import pytest


def _bcc() -> bool:
    try:
        import bcc  # noqa: F401
    except ImportError:
        return False
    return True


LAB = [
    pytest.mark.root,
    pytest.mark.lab,
    pytest.mark.skipif(os.geteuid() != 0, reason="the lab needs root"),
    pytest.mark.skipif(not _bcc(), reason="the lab's data plane needs bcc"),
    pytest.mark.skipif(
        not all(shutil.which(t) for t in ("ip", "tc", "gcc", "lldpd", "ethtool")),
        reason="needs iproute2, gcc, lldpd, ethtool",
    ),
]

"""``python -m cc.bench``: the benchmark's command line (:func:`cc.bench.benchmark.main`)."""

from __future__ import annotations

from cc.bench.benchmark import main

if __name__ == "__main__":
    raise SystemExit(main())

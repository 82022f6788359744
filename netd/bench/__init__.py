"""`netd bench …`: benchmarks that print JSON, one module per benchmark.

* :mod:`netd.bench.collect` — CPU cost of one collection tick against a naive reader;
* :mod:`netd.bench.bpf` — per-packet cost of the eBPF probes (``BPF_PROG_TEST_RUN``), with the
  frames of :mod:`netd.bench.frames`;
* :mod:`netd.bench.detect` — the detectors on labelled emulated traces;
* :mod:`netd.bench.api` — the HTTP service under open-loop load from :mod:`netd.bench.load`
  processes; its 5000-node listener is its own process (:mod:`netd.bench.fabric_listener`), both
  serving a :mod:`netd.bench.synthetic` cluster view.

`netd bench nccl` lives with the plugin it measures (:mod:`netd.nccl.bench`). Figures and how they
were measured: docs/benchmarks.md.
"""

from netd import public_face

__all__, __getattr__, __dir__ = public_face(
    __name__,
    {
        "collect": ("bench_collect", "build_bench_tree", "naive_tick"),
        "api": ("SyntheticCluster", "bench_api", "register_bench"),
        "bpf": ("TARGET_NS", "bench_bpf"),
        "detect": ("bench_detect",),
    },
)

"""netd health: is every netd up, collecting on time, and reading all of its sources?"""

from __future__ import annotations

from netd.dashboards.grafana import Dashboard, Panel, Row, Target, Variable
from netd.dashboards.promql import RATE, per_minute, rate

__all__ = ["netd_health"]

SEL = 'job=~"$job", instance=~"$instance"'
INSTANCE = "{{instance}}"


def _fleet() -> Row:
    return Row(
        "Fleet",
        (
            Panel(
                "netd targets up",
                "Prometheus targets of the chosen jobs that answered the last scrape. Bad: "
                "any target at 0 (alert NetdDown): that host's ports are invisible.",
                "none",
                (Target(f"up{{{SEL}}}", legend=INSTANCE),),
                kind="state-timeline",
                mappings=(("1", "up", "green"), ("0", "DOWN", "red")),
                thresholds=((0.5, "green"),),
                width=12,
            ),
            Panel(
                "netd versions running",
                "Instances per netd version. Bad: a version you did not mean to run "
                "(a host missed an upgrade).",
                "none",
                (Target(f"count by (version) (netd_build_info{{{SEL}}})", legend="{{version}}"),),
                kind="bargauge",
                width=6,
            ),
            Panel(
                "Hosts on the emulated fabric",
                "1 where netd found no RDMA device and serves synthetic counters. "
                "Bad: 1 on a GPU host (alert NetdEmulatedFabric): its RDMA driver is missing.",
                "none",
                (Target(f"netd_fabric_emulated{{{SEL}}}", legend=INSTANCE),),
                kind="bargauge",
                thresholds=((1, "red"),),
                width=6,
            ),
        ),
    )


def _loop() -> Row:
    return Row(
        "Collection loop",
        (
            Panel(
                "Tick duration per instance",
                "Wall time of the last collection (all sources). Bad: approaching "
                "the tick interval (1 s by default): ticks start late and rates get noisy.",
                "s",
                (Target(f"netd_tick_duration_seconds{{{SEL}}}", legend=INSTANCE),),
                thresholds=((0.5, "red"),),
                width=8,
            ),
            Panel(
                "Tick slots per second per instance",
                "Tick slots per second, ticked or passed over while the host is calm (1 / interval), "
                "and the ticks among them. Bad: 0 while the target is up (the loop is stuck: alert "
                "NetdStalled); slots below 1 / interval (ticks overrun). Ticks alone drop to "
                "1 / calm_interval while the host is calm (netd_tick_calm 1), by design: "
                "docs/detection.md, Tick cadence.",
                "hertz",
                (
                    Target(
                        f"{rate('netd_ticks_total', RATE, SEL)}"
                        f" + {rate('netd_tick_slots_passed_total', RATE, SEL)}",
                        legend=INSTANCE,
                    ),
                    Target(rate("netd_ticks_total", RATE, SEL), legend=f"{INSTANCE} ticks"),
                ),
                width=8,
            ),
            Panel(
                "Age of the last snapshot per instance",
                "Seconds since netd's last tick, as scraped. Bad: growing past a few intervals "
                "(calm_interval, 5 s, while the host is calm): values on every dashboard are frozen.",
                "s",
                (Target(f"time() - netd_last_tick_timestamp_seconds{{{SEL}}}", legend=INSTANCE),),
                thresholds=((10, "red"),),
                width=8,
            ),
            Panel(
                "Prometheus scrape duration of netd",
                "How long /metrics took to answer. Bad: close to the scrape "
                "timeout (the scrape fails and the host looks down).",
                "s",
                (Target(f"scrape_duration_seconds{{{SEL}}}", legend=INSTANCE),),
                width=12,
            ),
            Panel(
                "Series per scrape",
                "Samples netd exports per scrape. Bad: a sudden jump (cardinality grew, "
                "e.g. new devices) or drop (a source stopped).",
                "short",
                (Target(f"scrape_samples_scraped{{{SEL}}}", legend=INSTANCE),),
                width=12,
            ),
        ),
    )


def _sources() -> Row:
    return Row(
        "Sources",
        (
            Panel(
                "Source up per instance",
                "Whether each source's last read succeeded. Bad: DOWN for more than "
                "a tick (alert NetdSourceDown): the metrics it provides are missing.",
                "none",
                (Target(f"netd_source_up{{{SEL}}}", legend="{{instance}} {{source}}"),),
                kind="state-timeline",
                mappings=(("1", "ok", "green"), ("0", "DOWN", "red")),
                thresholds=((0.5, "green"),),
                width=24,
            ),
            Panel(
                "Source read duration",
                "Wall time of each source's last read. Bad: one source dominating the "
                "tick, or growing (mlx5 ethtool reads cost firmware commands).",
                "s",
                (Target(f"netd_source_duration_seconds{{{SEL}}}", legend="{{instance}} {{source}}"),),
                width=12,
            ),
            Panel(
                "Source read errors",
                "Failed reads per second (absence is not a failure). Bad: any sustained "
                "rate (alert NetdSourceErrors): some counters are intermittently stale.",
                "short",
                (Target(rate("netd_source_errors_total", RATE, SEL), legend="{{instance}} {{source}}"),),
                thresholds=((0.001, "red"),),
                width=12,
            ),
        ),
    )


def _detection() -> Row:
    return Row(
        "Detection",
        (
            Panel(
                "Active anomalies by kind and severity",
                "Findings netd's detectors hold open, per instance. Bad: critical findings (alert "
                "NetdAnomalyCritical); one kind open on many hosts at once.",
                "none",
                (
                    Target(
                        f"sum by (instance, kind, severity) (netd_anomaly_active{{{SEL}}})",
                        legend="{{instance}} {{kind}} {{severity}}",
                        sparse="only while a finding is open",
                    ),
                ),
                width=6,
            ),
            Panel(
                "PFC fast-path CPU per instance",
                "CPU time per second of the detectors' fast path (PFC counters sampled between ticks). Bad: "
                "a "
                "large share of a core (lower its rate in [detect]).",
                "percentunit",
                (Target(rate("netd_anomaly_fast_path_cpu_seconds_total", RATE, SEL), legend=INSTANCE),),
                width=6,
            ),
            Panel(
                "PFC fast-path samples per second per instance",
                "Fast-path samples taken per second (1 / its interval while on, 0 when off). Bad: below the "
                "configured rate (the samples overrun: storms are caught later).",
                "hertz",
                (Target(rate("netd_anomaly_fast_path_samples_total", RATE, SEL), legend=INSTANCE),),
                width=6,
            ),
            Panel(
                "Detector exceptions",
                "Exceptions per second raised by a detector (its last findings are kept). "
                "Bad: any (alert NetdDetectorErrors): that detector's anomalies go unreported.",
                "short",
                (
                    Target(
                        rate("netd_anomaly_detector_errors_total", RATE, SEL),
                        legend="{{instance}} {{detector}}",
                        sparse="series only after a detector raised",
                    ),
                ),
                thresholds=((0.001, "red"),),
                width=6,
            ),
        ),
    )


def _bpf() -> Row:
    runs = rate("netd_bpf_program_runs_total", RATE, SEL)
    run_time = rate("netd_bpf_program_run_seconds_total", RATE, SEL)
    fill = f"netd_bpf_map_entries{{{SEL}}} / netd_bpf_map_capacity{{{SEL}}}"
    bpf = "bpf"
    return Row(
        "eBPF probes (when [bpf] is enabled)",
        (
            Panel(
                "eBPF probes attached",
                "Whether each eBPF probe is attached. A probe without configured "
                "interfaces is skipped (0) by design; bad: a probe you configured at 0 (alert "
                "NetdBpfProbeFailed).",
                "none",
                (Target(f"netd_bpf_probe_up{{{SEL}}}", legend="{{instance}} {{probe}}", requires=bpf),),
                kind="state-timeline",
                mappings=(("1", "attached", "green"), ("0", "off", "text")),
                thresholds=((0.5, "green"),),
                width=12,
            ),
            Panel(
                "BPF program CPU (run time per second)",
                "Kernel time spent in netd's BPF programs per second "
                "(needs [bpf] run_stats). Bad: a visible share of a core: the probes cost the traffic they "
                "watch.",
                "percentunit",
                (Target(run_time, legend="{{instance}} {{program}}", requires=bpf),),
                width=12,
            ),
            Panel(
                "BPF program runs per second",
                "How often each program ran (packets or events seen). Bad: 0 on "
                "a probe whose traffic you expect (attached to the wrong interface).",
                "short",
                (Target(runs, legend="{{instance}} {{program}}", requires=bpf),),
                width=8,
            ),
            Panel(
                "BPF average run time",
                "Time per program run. Bad: growing with load (a hash map near "
                "full, long per-packet parsing).",
                "s",
                (
                    Target(
                        f"{run_time} / ({runs} > 0)",
                        legend="{{instance}} {{program}}",
                        requires=bpf,
                        sparse="only for programs that ran in the interval",
                    ),
                ),
                width=8,
            ),
            Panel(
                "BPF map fill",
                "Entries over capacity of each netd map. Bad: above 95% (alert NetdBpfMapFull): "
                "new flows are evicted or lost.",
                "percentunit",
                (Target(fill, legend="{{instance}} {{map}}", requires=bpf),),
                thresholds=((0.95, "red"),),
                max=1,
                width=8,
            ),
            Panel(
                "BPF map evictions per second",
                "Entries an LRU map dropped to make room. Bad: a steady rate on the flow table (flows "
                "overwritten before netd reads them; raise [bpf] flow_table_size).",
                "short",
                (
                    Target(
                        rate("netd_bpf_map_evictions_total", RATE, SEL),
                        legend="{{instance}} {{map}}",
                        requires=bpf,
                    ),
                ),
                width=24,
            ),
        ),
    )


def _tuner() -> Row:
    actions = f"sum by (instance, action) ({per_minute('netd_tuner_actions_total', RATE, SEL)})"
    return Row(
        "DCQCN tuner",
        (
            Panel(
                "Tuner decisions and applier results per minute",
                "hold / change / rollback: the tuner's decisions (one per tuning interval); applied, "
                "apply_failed, rolled_back, crash_recovered: what the applier did to the NICs. Bad: any "
                "apply_failed (alert NetdTunerApplyFailed); rollbacks (a change made things worse: alert "
                "NetdTunerRolledBack); change after change without a hold (oscillation).",
                "short",
                (Target(actions, legend="{{instance}} {{action}}"),),
                width=24,
            ),
        ),
    )


def _qos() -> Row:
    distinct = f"count by (setting) (count by (setting, value) (netd_qos_setting_info{{{SEL}}}))"
    return Row(
        "QoS configuration",
        (
            Panel(
                "Values per QoS setting across hosts",
                "How many different values each QoS setting (trust, pfc, ecn, dcqcn, mtu, dscp_prio, DCQCN "
                "parameters, ...) has among the chosen instances (docs/qos.md). Bad: more than 1 (alert "
                "NetdQosDrift): hosts disagree; `netd qos --fabric` names them and the fix.",
                "none",
                (Target(distinct, legend="{{setting}}"),),
                kind="bargauge",
                thresholds=((2, "red"),),
                width=12,
            ),
            Panel(
                "QoS contradictions per host",
                "Local QoS inconsistencies: PFC on a priority without ECN/DCQCN, RoCE traffic on a "
                "priority without PFC. Bad: anything above 0 (alert NetdQosInconsistent).",
                "none",
                (Target(f"netd_qos_local_findings{{{SEL}}}", legend="{{instance}} {{kind}}"),),
                kind="bargauge",
                thresholds=((1, "red"),),
                width=12,
            ),
        ),
    )


def netd_health() -> Dashboard:
    return Dashboard(
        uid="netd-health",
        title="netd / Health",
        description="Is every netd up, collecting on time, reading all of its sources, and what do its "
        "detectors and eBPF probes cost?",
        rows=(_fleet(), _loop(), _sources(), _detection(), _tuner(), _qos(), _bpf()),
        variables=(
            Variable("job", "Job", "label_values(netd_build_info, job)", "Prometheus job(s) scraping netd."),
            Variable(
                "instance",
                "Instance",
                'label_values(netd_build_info{job=~"$job"}, instance)',
                "netd endpoints of the chosen jobs.",
            ),
        ),
    )

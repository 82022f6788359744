"""``netd lab``: a virtual two-tier RoCE fabric in network namespaces, with real kernel packets.

Map (docs/lab.md explains the design):

* shape and life cycle: ``layout`` (names, addresses, ports), ``fabric`` (namespaces, veths, TBF
  bottlenecks), ``manage`` (up/down), ``status``, ``state`` (the state file), ``netns`` (helpers);
* switches: ``dataplane`` (ebpf/lab_switch.c: congestion point, wire taps, queue mirror), ``pfc``
  (PFC emulation), ``labd`` (the lab daemon holding both), ``control`` (its socket);
* hosts: ``csrc/`` (the C host agent), ``agent_build``, ``shm`` (its shared memory), ``publish``
  (its counters as sysfs trees netd reads), ``lldp``;
* traffic: ``params`` (the lab's DcqcnParams), ``controller`` (cc.model.dcqcn.rp_step over every flow),
  ``scenarios``, ``runner``, ``summary``/``render``, ``bench``, ``realtime``;
* the command: ``cli`` (registered in netd/cli.py's COMMANDS).
"""

from netd import public_face

__all__, __getattr__, __dir__ = public_face(
    __name__,
    {
        "manage": ("AGENT_DEFAULTS", "down", "up"),
        "status": ("lab_status", "list_labs", "render_status", "unhealthy"),
        "runner": ("RunResult", "Sample", "run_scenario"),
        "scenarios": ("SCENARIOS", "FlowSpec", "Scenario", "build_scenario"),
        "layout": (
            "IFINDEX_BASE",
            "MAX_PORTS",
            "NS_PREFIX",
            "LabLayout",
            "Link",
            "Node",
            "Port",
            "check_lab_name",
        ),
    },
)

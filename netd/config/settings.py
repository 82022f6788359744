"""netd's configuration: one TOML file, then ``NETD_*`` environment overrides.

Precedence (last wins): built-in defaults < the TOML file < environment <
command-line flags (the CLI passes those as ``overrides``).

Environment variables are named ``NETD_<KEY>`` for top-level keys and
``NETD_<SECTION>_<KEY>`` for keys in a section, e.g. ``NETD_INTERVAL=2``,
``NETD_ETHTOOL_BACKEND=files``, ``NETD_RDMA_EXCLUDE=mlx5_4,mlx5_5`` (lists are
comma-separated). Every problem is reported as a :class:`ConfigError` naming the
key, the bad value, what is allowed, and where the value came from.
"""

from __future__ import annotations

import difflib
import errno
import logging
import os
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from netd.config.bpf import BpfConfig
from netd.config.detect import DetectConfig
from netd.config.files import NotARegularFile, read_regular
from netd.config.kube import KubeConfig
from netd.config.nccl import NcclConfig
from netd.config.qos import QosConfig
from netd.config.service import ClusterConfig, CongestionConfig, SchedulerConfig, TopologyConfig
from netd.config.tuning import TuningConfig
from netd.config.types import OptionalPath, SetPath
from netd.errors import ConfigError

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_CONFIG_PATH", "Config", "load_config"]

DEFAULT_CONFIG_PATH = Path("/etc/netd/netd.toml")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RdmaConfig(_Section):
    include: tuple[str, ...] = ("*",)  # fnmatch patterns on RDMA device names
    exclude: tuple[str, ...] = ()
    rescan_interval: float = Field(30.0, gt=0, description="seconds between re-listing counter files")
    # Counters no per-tick signal or detector reads (netd.vocabulary.metric_names.TICK_COUNTERS) are
    # read this often, their last readings carried over in between; 0 reads them every tick.
    slow_interval: float = Field(
        10.0, ge=0, le=3600, description="seconds between reads of the export-only counters"
    )


class EthtoolConfig(_Section):
    enabled: bool = True
    # auto: ioctls when sysfs_root is /sys, else `ethtool -S` captures under <sysfs_root>/ethtool/
    backend: Literal["auto", "ioctl", "files"] = "auto"
    include: tuple[str, ...] = ("*",)  # fnmatch patterns on netdev names
    exclude: tuple[str, ...] = ()


class VerbsConfig(_Section):
    enabled: bool = True


class EmulatorConfig(_Section):
    tors: int = Field(2, ge=1, le=16)
    hosts_per_tor: int = Field(4, ge=2, le=32)
    ports_per_host: int = Field(2, ge=1, le=8)
    link_gbps: float = Field(200.0, gt=0, le=1600)
    seed: int = 0
    host_index: int = Field(0, ge=0, description="which emulated host this daemon reads")
    # Fabric time simulated per tick; counters are scaled up to the tick's wall time
    # so the emulator costs a few percent of a core (see docs/emulated-fabric.md).
    sim_ms_per_tick: float = Field(50.0, gt=0, le=1000)
    state_dir: OptionalPath = None  # default: /run/netd/emulated as root, else a per-user temp dir
    # The fabric simulation runs in a child process (netd.emulated.child) so that its numpy work
    # never holds the daemon's interpreter lock while the API answers; true keeps it in-process
    # (debugging, or code that reaches into the model).
    in_process: bool = False


class ApiConfig(_Section):
    # Bearer token for mutating endpoints (tuner apply/rollback, hint pins): the first line of this
    # file, or $NETD_API_TOKEN. Without one, mutating endpoints answer 403.
    token_file: OptionalPath = None
    # Host header names served besides IP literals, single-label names and the listen host (e.g. the
    # Service name kube-scheduler uses: netd-fabric.kube-system.svc); "*": any (netd.api.guard)
    allowed_hosts: tuple[str, ...] = ()


class Config(_Section):
    # mlx5 ethtool reads cost firmware commands (PPCNT per priority and group): keep >= 1 s on real hosts.
    interval: float = Field(1.0, ge=0.1, le=3600, description="seconds between ticks")
    # While the host is calm (no congestion, pause or loss signal, no open finding, no link change),
    # ticks come this far apart, in whole intervals; anything else brings every interval back at the
    # next slot. 0 (or <= interval): tick every interval always (netd.daemon.cadence).
    calm_interval: float = Field(5.0, ge=0, le=60, description="seconds between ticks while calm")
    listen: str = "127.0.0.1:9469"
    sysfs_root: SetPath = Path("/sys")
    fabric: Literal["auto", "hardware", "emulated"] = "auto"
    host: str = ""  # host label; default: the machine's hostname
    rdma: RdmaConfig = RdmaConfig()
    ethtool: EthtoolConfig = EthtoolConfig()
    verbs: VerbsConfig = VerbsConfig()
    emulator: EmulatorConfig = EmulatorConfig()
    api: ApiConfig = ApiConfig()
    topology: TopologyConfig = TopologyConfig()
    congestion: CongestionConfig = CongestionConfig()
    scheduler: SchedulerConfig = SchedulerConfig()
    cluster: ClusterConfig = ClusterConfig()
    detect: DetectConfig = DetectConfig()  # anomaly detection: thresholds and windows (docs/detection.md)
    bpf: BpfConfig = BpfConfig()
    nccl: NcclConfig = NcclConfig()  # NCCL tuner plugin socket, pins and hints (docs/nccl.md)
    tuning: TuningConfig = TuningConfig()  # DCQCN tuner and parameter applier (docs/tuning.md)
    qos: QosConfig = QosConfig()  # the QoS audit: what each port applies, drift across hosts (docs/qos.md)
    kube: KubeConfig = KubeConfig()  # labels, HyperNodes, taints for schedulers (docs/deploy.md)

    @field_validator("listen")
    @classmethod
    def _check_listen(cls, v: str) -> str:
        split_listen(v)
        return v

    def listen_address(self) -> tuple[str, int]:
        return split_listen(self.listen)


def split_listen(value: str) -> tuple[str, int]:
    """'HOST:PORT' (IPv6 as '[::1]:9469') → (host, port)."""
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"expected HOST:PORT with a port in 1..65535, e.g. 127.0.0.1:9469, got {value!r}")
    return host.strip("[]"), int(port)


def _sections() -> dict[str, type[BaseModel]]:
    out: dict[str, type[BaseModel]] = {}
    for name, f in Config.model_fields.items():
        if isinstance(f.annotation, type) and issubclass(f.annotation, BaseModel):
            out[name] = f.annotation
    return out


def _env_overrides(environ: Mapping[str, str]) -> dict[str, Any]:
    sections = _sections()
    out: dict[str, Any] = {}
    for key in Config.model_fields:
        if key in sections:
            for sub, f in sections[key].model_fields.items():
                var = f"NETD_{key}_{sub}".upper()
                if var in environ:
                    out.setdefault(key, {})[sub] = _env_value(environ[var], f.annotation)
        else:
            var = f"NETD_{key}".upper()
            if var in environ:
                out[key] = environ[var]
    return out


def _env_value(text: str, annotation: Any) -> Any:
    if getattr(annotation, "__origin__", None) is tuple:
        return tuple(x.strip() for x in text.split(",") if x.strip())
    return text


def _merge(base: dict[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in top.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = _merge(dict(out[k]), v)
        else:
            out[k] = v
    return out


# NETD_* variables that are not configuration keys: read by the NCCL plugin, the lab, the loader or
# the simulator's kernel cache (cc/sim/jit.py).
OTHER_VARIABLES = (
    "NETD_CONFIG",
    "NETD_API_TOKEN",
    "NETD_LAB_ROOT",
    "NETD_NCCL_SOCKET",
    "NETD_TUNER",
    "NETD_CACHE_DIR",
)


def _unknown_variables(environ: Mapping[str, str]) -> list[str]:
    """NETD_* variables that set nothing (a misspelt key is otherwise silently ignored)."""
    known = {f"NETD_{k}".upper() for k in Config.model_fields}
    for key, section in _sections().items():
        known |= {f"NETD_{key}_{sub}".upper() for sub in section.model_fields}
    out = []
    for var in sorted(environ):
        if not var.startswith("NETD_") or var in known or var.startswith(OTHER_VARIABLES):
            continue
        guess = difflib.get_close_matches(var, known, n=1)
        out.append(f"{var} is not a netd setting" + (f" (did you mean {guess[0]}?)" if guess else ""))
    return out


def _origin_of(key: tuple[Any, ...], layers: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """Which layer set ``key``: the command line, the environment, the file, else the defaults."""
    for where, data in layers:
        node: Any = data
        for part in key:
            if not isinstance(node, Mapping) or part not in node:
                break
            node = node[part]
        else:
            return where
    return "defaults"


def _describe(err: ValidationError, layers: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    lines = []
    for e in err.errors():
        key = ".".join(str(p) for p in e["loc"]) or "(top level)"
        origin = _origin_of(tuple(e["loc"]), layers)
        if e["type"] == "extra_forbidden":
            lines.append(f"unknown key `{key}` ({origin})")
        else:
            lines.append(f"`{key}`: {e['msg']} (got {e.get('input')!r}; {origin})")
    return "invalid configuration:\n  " + "\n  ".join(lines)


def _is_devnull(path: Path) -> bool:
    try:
        return os.path.samefile(path, os.devnull)
    except OSError:
        return False


def load_config(
    path: Path | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """Defaults < file < environment < overrides.

    ``path=None`` uses $NETD_CONFIG, else /etc/netd/netd.toml when it exists, else no file.
    """
    environ = os.environ if environ is None else environ
    data: dict[str, Any] = {}
    if path is None and environ.get("NETD_CONFIG"):
        path = Path(environ["NETD_CONFIG"])
    elif path is None and os.path.lexists(DEFAULT_CONFIG_PATH):
        # There but not a file (a directory, a dangling link) is an error, not "no configuration":
        # netd would otherwise run on its defaults without a word.
        path = DEFAULT_CONFIG_PATH
    if path is not None and not _is_devnull(path):  # NETD_CONFIG=/dev/null: the defaults, whatever /etc holds
        try:
            data = tomllib.loads(read_regular(path).decode("utf-8"))
        except NotARegularFile as exc:
            hint = " (a ConfigMap mounted without subPath?)" if exc.errno == errno.EISDIR else ""
            raise ConfigError(f"cannot read config file {path}: {exc.strerror}{hint}") from exc
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from exc
        except UnicodeDecodeError as exc:
            raise ConfigError(f"config file {path} is not UTF-8 text (TOML is UTF-8): {exc.reason}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc
    for problem in _unknown_variables(environ):
        log.warning("%s; it is ignored", problem)
    env = _env_overrides(environ)
    layers = [("from the command line", overrides or {}), ("from NETD_* environment", env)]
    layers.append((f"from {path}", data))
    try:
        return Config.model_validate(_merge(_merge(data, env), overrides or {}))
    except ValidationError as exc:
        raise ConfigError(_describe(exc, layers)) from exc

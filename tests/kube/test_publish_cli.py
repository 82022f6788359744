"""`netd fabric publish --once` as a process, through a kubeconfig, against the recorded API server
served over real HTTP on loopback: credentials loading, the round, the summary line, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.kube.apiserver import FakeApiServer
from tests.kube.schemas import check

pytestmark = pytest.mark.slow  # builds the emulated fabric in a child process


@pytest.fixture
def apiserver() -> Iterator[tuple[FakeApiServer, str]]:
    fake = FakeApiServer()

    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            resp = fake.request(self.command, self.path, body=body, headers=dict(self.headers))
            data = resp.data
            self.send_response(resp.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_PATCH = do_DELETE = _serve

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _kubeconfig(path: Path, url: str) -> Path:
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "lab", "cluster": {"server": url}}],
                "users": [{"name": "netd", "user": {"token": "s3cret"}}],
                "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": "netd"}}],
                "current-context": "lab",
            }
        )
    )
    return path


def _publish(kubeconfig: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NETD_")}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "netd",
            "fabric",
            "publish",
            "--once",
            "--emulated",
            "--kubeconfig",
            str(kubeconfig),
            *extra,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_publish_once_through_a_kubeconfig(apiserver, tmp_path: Path):
    fake, url = apiserver
    for h in range(8):  # the default emulated fabric: 2 ToRs x 4 hosts
        fake.add(
            f"/api/v1/nodes/emu-host{h}",
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"emu-host{h}"}},
        )
    config = _kubeconfig(tmp_path / "kubeconfig", url)

    done = _publish(config, "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "(server-side dry run)" in done.stdout and "0 deleted" in done.stdout
    assert all(r.query.get("dryRun") == "All" for r in fake.writes())
    assert "labels" not in fake.objects["/api/v1/nodes/emu-host0"]["metadata"]

    done = _publish(config)
    assert done.returncode == 0, done.stderr
    # 8 label patches, the Topology, 2 + 1 HyperNodes, 8 conditions
    assert done.stdout.startswith(
        "netd fabric publish: 20 written, 0 unchanged, 0 deleted from the emulated fabric"
    )
    assert all(
        {k.lower(): v for k, v in r.headers.items()}["authorization"] == "Bearer s3cret"
        for r in fake.requests
    )
    node = fake.objects["/api/v1/nodes/emu-host5"]
    assert node["metadata"]["labels"] == {"netd.io/tor": "emu-tor1", "netd.io/spine": "emu-spine0"}
    for obj in fake.objects.values():
        check(
            {k: v for k, v in obj.items() if k != "status"}
            | ({"status": obj["status"]} if "status" in obj else {})
        )


def test_a_refusing_api_server_is_exit_1_with_the_reason(apiserver, tmp_path: Path):
    fake, url = apiserver
    fake.missing_paths = {"/api/v1/nodes"}
    done = _publish(_kubeconfig(tmp_path / "kubeconfig", url))
    assert done.returncode == 1
    assert "HTTP 404" in done.stderr and "Traceback" not in done.stderr

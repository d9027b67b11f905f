"""Real servers for the tests: ``redis-server`` with the module loaded, on free ports, started
by the tests themselves (one per session, flushed before every test; a 3-master cluster for the
cluster clients), each with a startup deadline.

``RL_MODULE`` names the module (default: ``target/release/libredis_ratelimit.so`` of this
repository), ``RL_SERVER`` the server binary (default ``redis-server``).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator, List, Sequence

import pytest
import redis

ROOT = Path(__file__).resolve().parents[3]
MODULE = Path(os.environ.get("RL_MODULE", ROOT / "target/release/libredis_ratelimit.so")).resolve()
SERVER = os.environ.get("RL_SERVER", "redis-server")
STARTUP_DEADLINE_S = 20.0


def free_port() -> int:
    """A port nobody listens on (nor on its cluster bus port, +10000)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port + 10000 > 65535:
            continue
        with socket.socket() as bus:
            try:
                bus.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port


class Server:
    """A redis-server process on 127.0.0.1:``port``; stopped by :meth:`stop`."""

    def __init__(self, module: bool = True, cluster: bool = False, extra: Sequence[str] = ()) -> None:
        self.dir = tempfile.mkdtemp(prefix="rl-py-")
        self.port = free_port()
        args = [SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        self.socket = f"{self.dir}/redis.sock"
        args += ["--dir", self.dir, "--unixsocket", self.socket, "--unixsocketperm", "700"]
        if module:
            assert MODULE.exists(), f"{MODULE} is missing: run `cargo build --release` (or make build)"
            args += ["--loadmodule", str(MODULE)]
        if cluster:
            args += ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]
        args += list(extra)
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + STARTUP_DEADLINE_S
        while True:
            try:
                if redis.Redis(port=self.port, socket_timeout=1).ping():
                    break
            except redis.ConnectionError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{SERVER} on port {self.port} did not start within {STARTUP_DEADLINE_S} s")
            time.sleep(0.02)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.stop()


@pytest.fixture
def raw(server: Server) -> Iterator[redis.Redis]:
    """A plain redis-py client on a flushed server."""
    r = redis.Redis(port=server.port)
    r.flushall()
    yield r
    r.close()


@pytest.fixture(scope="session")
def plain_server() -> Iterator[Server]:
    """A server without the module."""
    s = Server(module=False)
    yield s
    s.stop()


@pytest.fixture(scope="session")
def cluster() -> Iterator[List[Server]]:
    """Three masters with the module, all slots assigned, state ok."""
    nodes = [Server(cluster=True) for _ in range(3)]
    try:
        subprocess.run(
            ["redis-cli", "--cluster", "create", *(f"127.0.0.1:{n.port}" for n in nodes)]
            + ["--cluster-replicas", "0", "--cluster-yes"],
            check=True,
            stdout=subprocess.DEVNULL,
            timeout=60,
        )
        deadline = time.monotonic() + 60
        for n in nodes:
            while b"cluster_state:ok" not in redis.Redis(port=n.port).execute_command("CLUSTER", "INFO"):
                assert time.monotonic() < deadline, "the cluster did not become ok"
                time.sleep(0.05)
        yield nodes
    finally:
        for n in nodes:
            n.stop()


def calls(r: redis.Redis) -> int:
    """Commands the server has run so far (INFO commandstats), less INFO itself and a new
    connection's handshake (redis-py sends CLIENT SETINFO to servers from 7.2 on)."""
    stats = r.info("commandstats")
    handshake = ("cmdstat_info", "cmdstat_client|setinfo", "cmdstat_hello")
    return sum(int(v["calls"]) for name, v in stats.items() if name not in handshake)


@pytest.fixture(scope="session")
def sentinel() -> Iterator[List[Server]]:
    """A master with the module and one sentinel monitoring it as ``mymaster``."""
    master = Server()
    directory = tempfile.mkdtemp(prefix="rl-py-sentinel-")
    port = free_port()
    config = Path(directory) / "sentinel.conf"
    config.write_text(
        f"port {port}\nbind 127.0.0.1\ndir {directory}\n"
        f"sentinel monitor mymaster 127.0.0.1 {master.port} 1\n"
        "sentinel down-after-milliseconds mymaster 60000\n"
    )
    process = subprocess.Popen(
        [SERVER, str(config), "--sentinel"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + STARTUP_DEADLINE_S
        while True:
            try:
                if redis.Redis(port=port).execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"):
                    break
            except redis.ConnectionError:
                pass
            assert process.poll() is None and time.monotonic() < deadline, "the sentinel did not start"
            time.sleep(0.02)
        watcher = Server.__new__(Server)
        watcher.port, watcher.dir, watcher.process = port, directory, process
        yield [master, watcher]
    finally:
        process.terminate()
        process.wait(10)
        shutil.rmtree(directory, ignore_errors=True)
        master.stop()

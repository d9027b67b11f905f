"""Private redis-server processes for the benchmarks: loopback, a free port, a directory of
their own, no persistence; optionally under a command prefix (taskset, valgrind). They die
with the Python process that started them. Python 3 standard library only."""

import ctypes
import os
import signal
import socket
import subprocess
import time

from resp import Redis

PR_SET_PDEATHSIG = 1


def _die_with_parent():
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# The arguments every benchmark server gets (as bench/run.sh starts its own).
BASE_ARGS = ["--bind", "127.0.0.1", "--protected-mode", "yes", "--daemonize", "no",
             "--save", "", "--appendonly", "no"]


class Server:
    """One redis-server; `modules` are loaded in order, `prefix` runs it (taskset, valgrind),
    `extra` are further arguments."""

    def __init__(self, name, workdir, modules=(), prefix=(), extra=(), start_timeout=60):
        self.name = name
        self.dir = os.path.join(workdir, name)
        os.makedirs(self.dir, exist_ok=True)
        self.modules = list(modules)
        self.prefix = list(prefix)
        self.extra = list(extra)
        self.start_timeout = start_timeout
        self.proc = None
        self.port = None
        self.log = os.path.join(self.dir, "redis.log")

    def args(self, port):
        args = ["redis-server"] + BASE_ARGS + ["--port", str(port), "--dir", self.dir,
                                               "--logfile", self.log]
        for m in self.modules:
            args += ["--loadmodule", m]
        return self.prefix + args + self.extra

    def start(self):
        for _ in range(3):
            port = free_port()
            out = open(os.path.join(self.dir, "stdout.log"), "ab")
            self.proc = subprocess.Popen(self.args(port), stdout=out, stderr=subprocess.STDOUT,
                                         preexec_fn=_die_with_parent)
            out.close()
            deadline = time.monotonic() + self.start_timeout
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    c = Redis("127.0.0.1", port, timeout=5)
                    try:
                        if c.call("PING") == "PONG":
                            self.port = port
                            return self
                    finally:
                        c.close()
                except (OSError, ConnectionError):
                    pass
                except Exception:  # LOADING or similar: not ready yet
                    pass
                time.sleep(0.1)
            self.stop()
        tail = ""
        try:
            with open(self.log) as f:
                tail = "".join(f.readlines()[-20:])
        except OSError:
            pass
        raise RuntimeError(f"{self.name}: redis-server did not start\n{tail}")

    def connect(self):
        return Redis("127.0.0.1", self.port)

    def stop(self, timeout=60):
        """SIGTERM (a clean exit, so valgrind writes its last dump), then SIGKILL."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def replicate(self, master, timeout=120):
        """Makes this server a replica of `master` and waits for the initial sync."""
        c = self.connect()
        try:
            c.call("REPLICAOF", "127.0.0.1", master.port)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                info = c.info("replication")
                if (info.get("master_link_status") == "up"
                        and info.get("master_sync_in_progress") == "0"):
                    break
                time.sleep(0.1)
            else:
                raise RuntimeError(f"{self.name}: no sync with {master.name} in {timeout} s")
        finally:
            c.close()
        m = master.connect()
        try:
            m.replicas = 1
            m.wait_replicas()
        finally:
            m.close()


class Servers:
    """Servers stopped together, whatever happens (a context manager)."""

    def __init__(self):
        self.all = []

    def start(self, server):
        self.all.append(server)
        return server.start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for s in reversed(self.all):
            try:
                s.stop()
            except Exception:
                pass
        return False

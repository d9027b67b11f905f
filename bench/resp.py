"""A minimal RESP2 client for the benchmarks (one connection; pipelining for bulk loads).
Python 3 standard library only."""

import socket


class ReplyError(Exception):
    pass


class Redis:
    def __init__(self, host, port, timeout=120):
        self.host, self.port = host, port
        self.replicas = 0  # replicas to wait for (WAIT) after a write phase; set by the caller
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader = self.sock.makefile("rb", buffering=1 << 16)

    def close(self):
        self.reader.close()
        self.sock.close()

    @staticmethod
    def encode(args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            b = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(b), b))
        return b"".join(out)

    def read(self):
        line = self.reader.readline()
        if not line:
            raise ConnectionError("server closed the connection")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return ReplyError(rest.decode(errors="replace"))
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.reader.read(n + 2)
            return data[:-2].decode(errors="replace")
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise ValueError(f"unexpected reply line {line!r}")

    def read_raw_bulk(self):
        """One bulk-string reply as bytes (DUMP payloads are binary)."""
        line = self.reader.readline()
        if line[:1] == b"-":
            return ReplyError(line[1:-2].decode(errors="replace"))
        n = int(line[1:-2])
        return None if n < 0 else self.reader.read(n + 2)[:-2]

    def call(self, *args):
        self.sock.sendall(self.encode(args))
        reply = self.read()
        if isinstance(reply, ReplyError):
            raise reply
        return reply

    def pipeline(self, commands, chunk=1000, raw=False):
        """Sends the commands in pipelined chunks; returns every reply (errors as values).
        raw: every reply is a bulk string, returned as bytes."""
        replies = []
        read = self.read_raw_bulk if raw else self.read
        for start in range(0, len(commands), chunk):
            batch = commands[start : start + chunk]
            self.sock.sendall(b"".join(self.encode(c) for c in batch))
            replies.extend(read() for _ in batch)
        return replies

    def info(self, section):
        fields = {}
        for line in self.call("INFO", section).splitlines():
            if line and not line.startswith("#") and ":" in line:
                k, v = line.split(":", 1)
                fields[k] = v
        return fields

    def command_stats(self, name):
        """(calls, usec, failed + rejected calls) of one command from INFO commandstats."""
        stats = self.info("commandstats").get(f"cmdstat_{name}", "")
        fields = dict(kv.split("=", 1) for kv in stats.split(",") if "=" in kv)
        failed = int(fields.get("failed_calls", 0)) + int(fields.get("rejected_calls", 0))
        return int(fields.get("calls", 0)), int(fields.get("usec", 0)), failed

    def wait_replicas(self, timeout_ms=120_000):
        """WAIT until every attached replica has the writes so far (no-op without replicas)."""
        if self.replicas:
            acked = self.call("WAIT", self.replicas, timeout_ms)
            if acked < self.replicas:
                raise RuntimeError(f"{acked} of {self.replicas} replicas caught up")

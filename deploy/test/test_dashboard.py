"""The dashboard (deploy/grafana/ratelimit.json) and the alert rules (deploy/prometheus/alerts.yml)
against a real Prometheus (Debian's, started here on a free loopback port) that scrapes a Node
app and a Python app serving /metrics, plus a collector whose Redis is down, after known
traffic (issue 31, "Dashboard and alerts"):

- ``promtool check rules`` passes;
- every panel's query and every rule's expression, evaluated through Prometheus' HTTP API,
  returns data (the traffic makes every alert's condition true);
- the documented queries (docs/observability.md) equal the traffic sent: the middleware's
  decisions per policy and outcome are the HTTP answers the apps gave, the per-policy counters
  are the module's own ``RL.POLICY STATS``, the top refused keys are ``RL.TOP``'s, and the
  refusal ratios are the ratios of what was sent.

Run by ``make deploy-test`` (part of ``make test``) with the Python package's venv.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "clients/python/src"), str(ROOT / "clients/python/tests")]

import redis  # noqa: E402
from conftest import Server, free_port  # noqa: E402
from prometheus_client import CollectorRegistry, start_http_server  # noqa: E402
from starlette.applications import Starlette  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import PlainTextResponse  # noqa: E402
from starlette.routing import Route  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402

from redis_ratelimit import AsyncRateLimit, Period, RateLimit  # noqa: E402
from redis_ratelimit.middleware import RateLimitMiddleware  # noqa: E402
from redis_ratelimit.prometheus import RateLimitCollector  # noqa: E402

DASHBOARD = ROOT / "deploy/grafana/ratelimit.json"
ALERTS = ROOT / "deploy/prometheus/alerts.yml"
OBSERVABILITY = ROOT / "docs/observability.md"
DEADLINE_S = 60.0
SCRAPE = "1s"
# Grafana's range variables as the test evaluates them.
GRAFANA_VARS = {"$__rate_interval": "5m", "$__interval": "1s", "$__range": "5m"}


def http_get(url: str, timeout: float = 5.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as reply:
        return bytes(reply.read())


class Prometheus:
    """Debian's prometheus on a free port with ``config``, its data in a temporary directory."""

    def __init__(self, config: str) -> None:
        self.dir = tempfile.mkdtemp(prefix="rl-prometheus-")
        Path(self.dir, "prometheus.yml").write_text(config)
        shutil.copy(ALERTS, Path(self.dir, "alerts.yml"))
        self.port = free_port()
        self.process = subprocess.Popen(
            [
                "prometheus",
                f"--config.file={self.dir}/prometheus.yml",
                f"--storage.tsdb.path={self.dir}/data",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
            ],
            stdout=subprocess.DEVNULL,
            stderr=open(Path(self.dir, "log"), "wb"),  # noqa: SIM115 (closed with the process)
        )
        deadline = time.monotonic() + DEADLINE_S
        while True:
            try:
                if http_get(f"http://127.0.0.1:{self.port}/-/ready", 1).strip():
                    return
            except OSError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"prometheus did not start:\n{Path(self.dir, 'log').read_text()}")
            time.sleep(0.1)

    def query(self, expr: str) -> List[Dict[str, Any]]:
        """The instant vector of ``expr`` now (status success asserted)."""
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        reply = json.loads(http_get(url))
        assert reply["status"] == "success", (expr, reply)
        assert reply["data"]["resultType"] == "vector", (expr, reply)
        return list(reply["data"]["result"])

    def values(self, expr: str, *labels: str) -> Dict[Tuple[str, ...], float]:
        """``expr``'s samples by the given labels."""
        return {tuple(s["metric"].get(k, "") for k in labels): float(s["value"][1]) for s in self.query(expr)}

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def wait_until(check: Any, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            if check():
                return
        except (OSError, AssertionError, KeyError):
            pass
        assert time.monotonic() < deadline, f"not within {DEADLINE_S} s: {what}"
        time.sleep(0.25)


def panel_queries() -> List[Tuple[str, str]]:
    dashboard = json.loads(DASHBOARD.read_text())
    out = []
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            for var, value in GRAFANA_VARS.items():
                expr = expr.replace(var, value)
            out.append((f"panel {panel['title']!r} {target['refId']}", expr))
    assert len(out) >= 10
    return out


def rule_queries() -> List[Tuple[str, str]]:
    """Every rule's expression (promtool prints them as Prometheus parsed them)."""
    import yaml  # PyYAML, a dependency of the venv's tools

    groups = yaml.safe_load(ALERTS.read_text())["groups"]
    return [(f"rule {rule['alert']}", rule["expr"]) for group in groups for rule in group["rules"]]


def documented_queries() -> Dict[str, str]:
    """The PromQL block of docs/observability.md, by the comment above each query."""
    text = OBSERVABILITY.read_text()
    block = re.search(r"```promql\n(.*?)```", text, re.S)
    assert block, "docs/observability.md has no promql block"
    queries: Dict[str, str] = {}
    name = ""
    for line in block.group(1).splitlines():
        if line.startswith("#"):
            name = line.lstrip("# ").strip()
            queries[name] = ""
        elif line.strip():
            queries[name] += line + "\n"
    return queries


@pytest.fixture
def redis_server() -> Iterator[Server]:
    server = Server()
    yield server
    server.stop()


def test_promtool_checks_the_rules() -> None:
    out = subprocess.run(["promtool", "check", "rules", str(ALERTS)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS: 6 rules found" in out.stdout


def test_every_panel_and_rule_returns_data_and_the_documented_ones_equal_the_traffic(redis_server: Server) -> None:
    admin = RateLimit(port=redis_server.port)
    admin.set_policy("free", Period(4, "1m"))
    admin.set_policy("trial", Period(2, "1m"), shadow=True)
    admin.execute_command("RL.POLICY", "SET", "free", "PERIOD", 2, 60000, "CANDIDATE")  # a stricter candidate

    # The Node app (ioredis, prom-client).
    node_env = {
        **os.environ,
        "REDIS_PORT": str(redis_server.port),
        "NODE_PATH": str(ROOT / "clients/node/node_modules"),
    }
    node = subprocess.Popen(
        ["node", str(ROOT / "deploy/test/node_app.js")], stdout=subprocess.PIPE, env=node_env, text=True
    )
    # A process whose collector's Redis is down (nobody listens on its port): ratelimit_up 0, within
    # its timeout — below the scrape timeout (here the 1 s scrape interval).
    down_script = (
        "import sys, time, redis\n"
        "from prometheus_client import CollectorRegistry, start_http_server\n"
        "from redis_ratelimit.prometheus import RateLimitCollector\n"
        "registry = CollectorRegistry()\n"
        f"registry.register(RateLimitCollector(redis.Redis(port={free_port()}), timeout=0.3))\n"
        "server, _ = start_http_server(0, addr='127.0.0.1', registry=registry)\n"
        "print(server.server_port, flush=True)\n"
        "time.sleep(3600)\n"
    )
    down = subprocess.Popen(
        [sys.executable, "-c", down_script],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "clients/python/src")},
    )
    prometheus = None
    metrics_server = None
    try:
        assert node.stdout is not None and down.stdout is not None
        node_port = int(node.stdout.readline())
        down_port = int(down.stdout.readline())

        # The Python app: the middleware in this process (its own decisions counted here), the
        # collector served on a free port.
        registry = CollectorRegistry()
        registry.register(RateLimitCollector(redis.Redis(port=redis_server.port), top_keys=10))
        metrics_server, _ = start_http_server(0, addr="127.0.0.1", registry=registry)
        python_port = metrics_server.server_port

        async def hello(request: Request) -> PlainTextResponse:
            return PlainTextResponse("hello")

        def python_app(policy: str) -> Starlette:
            app = Starlette(routes=[Route("/", hello)])
            app.add_middleware(
                RateLimitMiddleware,
                client=AsyncRateLimit(port=redis_server.port),
                policy=policy,
                key=lambda request: request.headers.get("x-tenant"),
            )
            return app

        python_apps = {policy: python_app(policy) for policy in ("free", "trial", "nosuch")}
        answers: Dict[Tuple[str, str], int] = {}  # (policy, outcome) → HTTP answers, both apps

        def outcome(status: int) -> str:
            return {200: "admitted", 429: "limited"}.get(status, "error")

        def send(app: str, policy: str, tenant: str, n: int) -> None:
            for _ in range(n):
                if app == "node":
                    request = urllib.request.Request(
                        f"http://127.0.0.1:{node_port}/p/{policy}", headers={"x-tenant": tenant}
                    )
                    try:
                        status = urllib.request.urlopen(request, timeout=5).status
                    except urllib.error.HTTPError as error:
                        status = error.code
                else:
                    with TestClient(python_apps[policy]) as http:
                        status = http.get("/", headers={"x-tenant": tenant}).status_code
                key = (policy, outcome(status))
                answers[key] = answers.get(key, 0) + 1

        # Warm-up before Prometheus' first scrape: every series exists, with an admitted and a
        # limited count under each policy (a counter's first sample then extrapolates alike).
        for app in ("node", "python"):
            send(app, "free", f"warm-{app}", 5)
            send(app, "trial", f"warm-{app}", 3)
            send(app, "nosuch", f"warm-{app}", 1)

        config = (
            f"global:\n  scrape_interval: {SCRAPE}\n  evaluation_interval: {SCRAPE}\n"
            "rule_files: [alerts.yml]\n"
            "scrape_configs:\n"
            "  - job_name: api\n"
            f"    static_configs: [{{targets: ['127.0.0.1:{node_port}', '127.0.0.1:{python_port}']}}]\n"
            "  - job_name: api-down\n"
            f"    static_configs: [{{targets: ['127.0.0.1:{down_port}']}}]\n"
        )
        prometheus = Prometheus(config)
        prom = prometheus
        wait_until(lambda: len(prom.query('ratelimit_up{job="api"} == 1')) == 2, "both apps scraped, up 1")
        wait_until(lambda: len(prom.query('ratelimit_up{job="api-down"} == 0')) == 1, "the down collector: up 0")
        before_policy = prom.values(
            'max without (instance) (ratelimit_policy_decisions_total{job="api"})', "policy", "outcome"
        )
        before_mw = prom.values("sum by (policy, outcome) (ratelimit_middleware_decisions_total)", "policy", "outcome")
        answers_before = dict(answers)

        # The known traffic.
        send("node", "free", "tenant-a", 20)  # 4 admitted, 16 limited
        send("python", "free", "tenant-b", 5)  # 4 admitted, 1 limited
        send("node", "free", "tenant-b", 2)  # the same key as Python's: 2 limited
        send("node", "trial", "tenant-c", 3)  # 2 admitted, 1 would-be refusal (admitted)
        send("python", "nosuch", "tenant-d", 2)  # errors: no such policy
        send("node", "nosuch", "tenant-d", 1)
        raw = redis.Redis(port=redis_server.port)
        with pytest.raises(redis.ResponseError):
            raw.execute_command("RL.TOKEN", "ratelimit:bad", "x", 1, 1000)  # a module error
        raw.execute_command("RL.TOKEN", "ratelimit:waiter", 1, 1, "1h")
        raw.execute_command("RL.TOKEN", "ratelimit:waiter", 1, 1, "1h", "WAIT", 50)  # a WAIT timeout
        assert answers[("free", "limited")] - answers_before.get(("free", "limited"), 0) == 19

        stats = {p: admin.policy_stats(p) for p in ("free", "trial")}
        top = {row[0].decode(): int(row[1]) for row in raw.execute_command("RL.TOP", "COUNT", 10)}

        def caught_up() -> bool:
            policy_now = prom.values(
                'max without (instance) (ratelimit_policy_decisions_total{job="api"})', "policy", "outcome"
            )
            mw_now = prom.values("sum by (policy, outcome) (ratelimit_middleware_decisions_total)", "policy", "outcome")
            return policy_now.get(("free", "limited")) == stats["free"]["limited"] and all(
                mw_now.get(k) == v for k, v in answers.items()
            )

        wait_until(caught_up, "Prometheus has the final counters")
        time.sleep(2.5)  # two more scrapes and rule evaluations at the final values

        # 1. Every panel's and rule's query returns data.
        empty = [name for name, expr in panel_queries() + rule_queries() if not prom.query(expr)]
        assert not empty, f"no data: {empty}"

        # 2. The documented queries equal the traffic.
        docs = documented_queries()
        policy_now = prom.values(
            'max without (instance) (ratelimit_policy_decisions_total{job="api"})', "policy", "outcome"
        )
        for name in ("free", "trial"):
            for field in ("admitted", "limited", "shadow_limited", "near_limit"):
                assert policy_now[(name, field)] == stats[name][field], (name, field)
        mw_now = prom.values("sum by (policy, outcome) (ratelimit_middleware_decisions_total)", "policy", "outcome")
        assert {k: v for k, v in mw_now.items() if v} == {k: float(v) for k, v in answers.items()}
        top_now = prom.values(docs["Top refused keys now (with topKeys / top_keys)"], "key")
        assert {k[0]: v for k, v in top_now.items()} == {k: float(v) for k, v in top.items()}

        def sent(
            counts: Dict[Tuple[str, str], float], base: Dict[Tuple[str, str], float], key: Tuple[str, str]
        ) -> float:
            return counts.get(key, 0) - base.get(key, 0)

        ratio = prom.values(docs["Refusal ratio by policy"], "policy")
        limited = sent(policy_now, before_policy, ("free", "limited"))
        admitted = sent(policy_now, before_policy, ("free", "admitted"))
        assert (limited, admitted) == (19, 8)
        # rate() extrapolates each app's series by its own scrape times: the ratio of what was
        # sent, within what that extrapolation can move it (a fraction of a scrape interval).
        assert ratio[("free",)] == pytest.approx(limited / (limited + admitted), rel=0.08)
        mw_ratio = prom.values(docs["The middleware's 429 ratio per policy, all processes"], "policy")
        mw_total = sum(sent(mw_now, before_mw, ("free", o)) for o in ("admitted", "limited", "error"))
        assert mw_ratio[("free",)] == pytest.approx(sent(mw_now, before_mw, ("free", "limited")) / mw_total, rel=0.08)
        shadow = prom.values(docs["What a SHADOW policy would refuse if enforced"], "policy")
        assert shadow[("trial",)] > 0 and ("free",) in shadow and shadow[("free",)] == 0
        errors = prom.values(docs["Redis errors behind the middleware (fail-open lets them through)"], "policy")
        assert errors[("nosuch",)] > 0 and errors[("free",)] == 0
        by_command = prom.values(docs["Refusal rate by command (refusals per second, server side)"], "command")
        assert by_command[("hit",)] > 0

        # 3. The alerts whose conditions the traffic met are pending or firing.
        alerts = json.loads(http_get(f"http://127.0.0.1:{prom.port}/api/v1/alerts"))["data"]["alerts"]
        active = {a["labels"]["alertname"] for a in alerts}
        assert active >= {
            "RateLimitRedisUnreachable",
            "RateLimitMiddlewareErrors",
            "RateLimitPolicyRefusingMost",
            "RateLimitShadowWouldRefuse",
            "RateLimitModuleErrors",
            "RateLimitWaitTimeouts",
        }, active
    finally:
        if prometheus is not None:
            prometheus.stop()
        if metrics_server is not None:
            metrics_server.shutdown()
        for process in (node, down):
            process.terminate()
            process.wait(10)

"""Prometheus metrics with ``prometheus_client`` (an optional dependency:
``pip install redis-ratelimit[prometheus]``)::

    from prometheus_client import REGISTRY
    from redis_ratelimit.prometheus import RateLimitCollector

    REGISTRY.register(RateLimitCollector(redis.Redis(), top_keys=10))

At each scrape the collector reads the module's counters (``INFO ratelimit``: per command, per
policy, waiting clients, ``RL.TOP``'s totals) and, with ``top_keys``, ``RL.TOP`` — one pipelined
round trip per node (every primary of a ``RedisCluster``) — plus the middleware's decisions
counted in this process. Labels stay low-cardinality: command, policy, outcome; keys only in the
opt-in ``ratelimit_top_key_refused`` (at most 100 of them). ``docs/observability.md`` lists every
metric. The client is a synchronous redis-py ``Redis`` or ``RedisCluster`` (a
:class:`~redis_ratelimit.RateLimit` is one): scrapes run outside the event loop.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, Iterator, List, Mapping, Tuple, Union, cast

import redis
import redis.cluster
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from redis.exceptions import RedisError

from .outcomes import OUTCOMES, decision_counts

#: ``INFO`` commands whose calls decide nothing (their admitted/limited stay 0).
NOT_DECIDING = frozenset({"peek", "info", "restore", "top", "refund", "release", "policy"})
POLICY_OUTCOMES = ("admitted", "limited", "shadow_limited", "near_limit")
MAX_TOP_KEYS = 100

Client = Union[redis.Redis, "redis.cluster.RedisCluster"]


class Snapshot:
    """Every node's counters added up, and the top keys across nodes."""

    def __init__(self) -> None:
        self.fields: Dict[str, int] = {}
        self.policies: Dict[str, Dict[str, int]] = {}
        self.top: List[Tuple[str, int]] = []

    def add_info(self, info: Mapping[str, Any]) -> None:
        for name, value in info.items():
            name = name.decode() if isinstance(name, bytes) else str(name)
            if not name.startswith("ratelimit_"):
                continue
            field = name[len("ratelimit_") :]
            if isinstance(value, dict):
                if field.startswith("policy_"):
                    stats = self.policies.setdefault(field[len("policy_") :], {})
                    for k, v in value.items():
                        if isinstance(v, int):
                            stats[str(k)] = stats.get(str(k), 0) + v
            elif isinstance(value, int) and not isinstance(value, bool):
                self.fields[field] = self.fields.get(field, 0) + value

    def commands(self) -> List[str]:
        """The commands INFO counts (those with a ``<cmd>_calls`` field)."""
        return [f[: -len("_calls")] for f in self.fields if f.endswith("_calls")]


def _text(value: object) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


class RateLimitCollector(Collector):
    """The module's metrics and the middleware's, for a ``prometheus_client`` registry.

    ``client``: a synchronous redis-py ``Redis`` or ``RedisCluster``; ``top_keys``: expose the
    n most refused keys (``RL.TOP``) as ``ratelimit_top_key_refused{key}`` (0 to 100, default 0).
    """

    def __init__(self, client: Client, top_keys: int = 0) -> None:
        if not isinstance(client, (redis.Redis, redis.cluster.RedisCluster)):
            raise TypeError("RateLimitCollector takes a synchronous redis.Redis or redis.cluster.RedisCluster")
        if isinstance(top_keys, bool) or not isinstance(top_keys, int) or not 0 <= top_keys <= MAX_TOP_KEYS:
            raise ValueError(f"top_keys must be an integer from 0 to {MAX_TOP_KEYS}")
        self.client = client
        self.top_keys = top_keys

    def _nodes(self) -> List[redis.Redis]:
        if isinstance(self.client, redis.cluster.RedisCluster):
            cluster = cast(Any, self.client)
            return [cluster.get_redis_connection(node) for node in cluster.get_primaries()]
        return [self.client]

    def scrape(self) -> Snapshot:
        """Reads every node: ``INFO ratelimit`` (and ``RL.TOP COUNT n``), one round trip each."""
        snapshot = Snapshot()
        top: Dict[str, int] = {}
        for node in self._nodes():
            pipe = cast(Any, node.pipeline(transaction=False))
            pipe.execute_command("INFO", "ratelimit")
            if self.top_keys:
                pipe.execute_command("RL.TOP", "COUNT", self.top_keys)
            replies = pipe.execute()
            snapshot.add_info(replies[0])
            for row in replies[1] if self.top_keys else []:
                key = _text(row[0])
                top[key] = top.get(key, 0) + int(row[1])
        snapshot.top = sorted(top.items(), key=lambda kv: (-kv[1], kv[0]))[: self.top_keys]
        return snapshot

    def describe(self) -> Iterable[Metric]:
        """The metric names, without asking Redis (``register`` calls this)."""
        return list(self._families(None))

    def collect(self) -> Iterable[Metric]:
        try:
            snapshot = self.scrape()
        except (RedisError, OSError):
            return self._families(None, up=0)
        return self._families(snapshot)

    def _families(self, s: Union[Snapshot, None], up: int = 1) -> Iterator[Metric]:
        yield GaugeMetricFamily("ratelimit_up", "Whether every node answered the last scrape (1) or not (0)", up)
        decisions = CounterMetricFamily(
            "ratelimit_decisions",
            "Limiting calls the module decided, by command and outcome (admitted, limited)",
            labels=["command", "outcome"],
        )
        calls = CounterMetricFamily(
            "ratelimit_calls", "Calls of each module command, errors included", labels=["command"]
        )
        errors = CounterMetricFamily(
            "ratelimit_errors", "Calls of each module command answered with an error", labels=["command"]
        )
        policy = CounterMetricFamily(
            "ratelimit_policy_decisions",
            "Decisions per server policy (RL.HIT) by outcome (admitted, limited, shadow_limited, near_limit)",
            labels=["policy", "outcome"],
        )
        fields = s.fields if s else {}
        if s:
            for command in s.commands():
                calls.add_metric([command], fields.get(f"{command}_calls", 0))
                errors.add_metric([command], fields.get(f"{command}_errors", 0))
                if command not in NOT_DECIDING:
                    for outcome in ("admitted", "limited"):
                        decisions.add_metric([command, outcome], fields.get(f"{command}_{outcome}", 0))
            for name, stats in s.policies.items():
                for outcome in POLICY_OUTCOMES:
                    policy.add_metric([name, outcome], stats.get(outcome, 0))
        if s or up:
            yield from (decisions, calls, errors, policy)
            for name, kind, text in (
                ("waiting", GaugeMetricFamily, "Clients blocked in WAIT now"),
                ("wait_admitted", CounterMetricFamily, "Calls admitted after waiting (WAIT)"),
                ("wait_timeouts", CounterMetricFamily, "Waits (WAIT) that timed out"),
                ("top_refusals", GaugeMetricFamily, "Refusals RL.TOP covers now (the last one to two windows)"),
                ("top_error_bound", GaugeMetricFamily, "Every count RL.TOP reports is within this of the true count"),
            ):
                family = kind(f"ratelimit_{name}", text, labels=[])
                if s:
                    family.add_metric([], fields.get(name, 0))
                yield family
            if self.top_keys:
                keys = GaugeMetricFamily(
                    "ratelimit_top_key_refused",
                    f"Refusals of the {self.top_keys} most refused keys now (RL.TOP)",
                    labels=["key"],
                )
                for key, refused in s.top if s else []:
                    keys.add_metric([key], refused)
                yield keys
        middleware = CounterMetricFamily(
            "ratelimit_middleware_decisions",
            "This process's RateLimitMiddleware decisions by policy and outcome (admitted, limited, error)",
            labels=["policy", "outcome"],
        )
        for name, counts in decision_counts():
            for outcome in OUTCOMES:
                middleware.add_metric([name, outcome], counts.get(outcome, 0))
        yield middleware

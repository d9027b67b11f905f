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
metric.

:class:`RateLimitCollector` takes a synchronous redis-py ``Redis`` or ``RedisCluster`` (a
:class:`~redis_ratelimit.RateLimit` is one). An asyncio application (FastAPI, Starlette) uses
:class:`AsyncRateLimitCollector` with its ``redis.asyncio`` client: its :meth:`~AsyncRateLimitCollector.asgi_app`
serves ``/metrics``, reading the servers without blocking the event loop::

    collector = AsyncRateLimitCollector(redis.asyncio.Redis(), top_keys=10)
    REGISTRY.register(collector)
    app.mount("/metrics", collector.asgi_app())

Both wait at most ``timeout`` seconds (default 5, below Prometheus' 10 s scrape timeout) for the
servers: past it the scrape answers ``ratelimit_up 0`` with the middleware's counters, and a
server that is still late gets no more commands until it answers.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any, Awaitable, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple, Union, cast

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector
from redis.exceptions import RedisError

from .outcomes import OUTCOMES, decision_counts

#: ``INFO`` commands whose calls decide nothing (their admitted/limited stay 0).
NOT_DECIDING = frozenset({"peek", "info", "restore", "top", "refund", "release", "policy"})
POLICY_OUTCOMES = ("admitted", "limited", "shadow_limited", "near_limit")
#: A candidate's outcomes (its INFO fields are ``candidate_<outcome>``).
CANDIDATE_OUTCOMES = ("admitted", "limited", "near_limit")
#: The INFO field of one policy's counters: ``ratelimit_policy_stats_<name>`` (no other field
#: starts so, whatever the policy's name).
POLICY_LINE = "policy_stats_"
MAX_TOP_KEYS = 100
#: How long a scrape waits for the servers by default (seconds).
DEFAULT_TIMEOUT_S = 5.0

Client = Union[redis.Redis, "redis.cluster.RedisCluster"]
AsyncClient = Union[redis.asyncio.Redis, "redis.asyncio.cluster.RedisCluster"]


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
                if field.startswith(POLICY_LINE):
                    stats = self.policies.setdefault(field[len(POLICY_LINE) :], {})
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


def _check(top_keys: int, timeout: float) -> None:
    if isinstance(top_keys, bool) or not isinstance(top_keys, int) or not 0 <= top_keys <= MAX_TOP_KEYS:
        raise ValueError(f"top_keys must be an integer from 0 to {MAX_TOP_KEYS}")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")


def _snapshot(replies_per_node: Iterable[List[Any]], top_keys: int) -> Snapshot:
    """The replies of each node (``INFO ratelimit``, then ``RL.TOP`` when asked) added up."""
    snapshot = Snapshot()
    top: Dict[str, int] = {}
    for replies in replies_per_node:
        snapshot.add_info(replies[0])
        for row in replies[1] if top_keys else []:
            key = _text(row[0])
            top[key] = top.get(key, 0) + int(row[1])
    snapshot.top = sorted(top.items(), key=lambda kv: (-kv[1], kv[0]))[:top_keys]
    return snapshot


class _Families:
    """The metric families of a snapshot (shared by the sync and asyncio collectors)."""

    top_keys: int

    def describe(self) -> Iterable[Metric]:
        """The metric names, without asking Redis (``register`` calls this)."""
        return list(self._families(None))

    def _families(self, s: Union[Snapshot, None], up: int = 1) -> Iterator[Metric]:
        return _families(s, up, self.top_keys)


class RateLimitCollector(_Families, Collector):
    """The module's metrics and the middleware's, for a ``prometheus_client`` registry.

    ``client``: a synchronous redis-py ``Redis`` or ``RedisCluster``; ``top_keys``: expose the
    n most refused keys (``RL.TOP``) as ``ratelimit_top_key_refused{key}`` (0 to 100, default 0);
    ``timeout``: how long a scrape waits for the servers (seconds, default 5) before it answers
    ``ratelimit_up 0``. The servers are read on a worker thread so that the wait is bounded
    whatever the client's socket timeout; while a read is late, later scrapes wait for it
    rather than send more commands.
    """

    def __init__(self, client: Client, top_keys: int = 0, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        if not isinstance(client, (redis.Redis, redis.cluster.RedisCluster)):
            raise TypeError("RateLimitCollector takes a synchronous redis.Redis or redis.cluster.RedisCluster")
        _check(top_keys, timeout)
        self.client = client
        self.top_keys = top_keys
        self.timeout = float(timeout)
        self._lock = threading.Lock()
        self._reading: Optional[concurrent.futures.Future[Snapshot]] = None

    def _nodes(self) -> List[redis.Redis]:
        if isinstance(self.client, redis.cluster.RedisCluster):
            cluster = cast(Any, self.client)
            return [cluster.get_redis_connection(node) for node in cluster.get_primaries()]
        return [self.client]

    def scrape(self) -> Snapshot:
        """Reads every node: ``INFO ratelimit`` (and ``RL.TOP COUNT n``), one round trip each
        (in the calling thread, without the timeout)."""
        replies = []
        for node in self._nodes():
            pipe = cast(Any, node.pipeline(transaction=False))
            pipe.execute_command("INFO", "ratelimit")
            if self.top_keys:
                pipe.execute_command("RL.TOP", "COUNT", self.top_keys)
            replies.append(pipe.execute())
        return _snapshot(replies, self.top_keys)

    def _read(self) -> concurrent.futures.Future[Snapshot]:
        """The read in progress, or a new one on a daemon thread of its own (a hung server
        never holds the process at exit)."""
        with self._lock:
            if self._reading is None or self._reading.done():
                reading: concurrent.futures.Future[Snapshot] = concurrent.futures.Future()

                def read() -> None:
                    try:
                        reading.set_result(self.scrape())
                    except BaseException as error:  # handed to the scrape that waits for it
                        reading.set_exception(error)

                threading.Thread(target=read, name="ratelimit-scrape", daemon=True).start()
                self._reading = reading
            return self._reading

    def collect(self) -> Iterable[Metric]:
        try:
            snapshot = self._read().result(timeout=self.timeout)
        except (RedisError, OSError, concurrent.futures.TimeoutError):
            return self._families(None, up=0)
        return self._families(snapshot)


class AsyncRateLimitCollector(_Families, Collector):
    """:class:`RateLimitCollector` for asyncio applications: ``client`` is a
    ``redis.asyncio.Redis`` or ``redis.asyncio.cluster.RedisCluster`` (an
    :class:`~redis_ratelimit.AsyncRateLimit` is one).

    ``prometheus_client`` collects synchronously, so the servers are read by
    :meth:`refresh` (a coroutine, at most ``timeout`` seconds) and :meth:`collect` reports the
    last read: serve ``/metrics`` with :meth:`asgi_app`, which refreshes, then renders the
    registry — or ``await collector.refresh()`` in your own handler before
    ``generate_latest()``. Before the first refresh, or when the last one failed or was late,
    the collector reports ``ratelimit_up 0``.
    """

    def __init__(self, client: AsyncClient, top_keys: int = 0, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        if not isinstance(client, (redis.asyncio.Redis, redis.asyncio.cluster.RedisCluster)):
            raise TypeError("AsyncRateLimitCollector takes a redis.asyncio.Redis or redis.asyncio.cluster.RedisCluster")
        _check(top_keys, timeout)
        self.client = client
        self.top_keys = top_keys
        self.timeout = float(timeout)
        self._last: Optional[Snapshot] = None
        self._reading: Optional[asyncio.Future[Snapshot]] = None

    async def _node_replies(self) -> List[List[Any]]:
        if isinstance(self.client, redis.asyncio.cluster.RedisCluster):
            cluster = cast(Any, self.client)
            await cluster.initialize()

            async def node(primary: Any) -> List[Any]:
                asked: List[Awaitable[Any]] = [cluster.execute_command("INFO", "ratelimit", target_nodes=primary)]
                if self.top_keys:
                    asked.append(cluster.execute_command("RL.TOP", "COUNT", self.top_keys, target_nodes=primary))
                return list(await asyncio.gather(*asked))

            return list(await asyncio.gather(*(node(p) for p in cluster.get_primaries())))
        pipe = cast(Any, self.client.pipeline(transaction=False))
        pipe.execute_command("INFO", "ratelimit")
        if self.top_keys:
            pipe.execute_command("RL.TOP", "COUNT", self.top_keys)
        return [list(await pipe.execute())]

    async def scrape(self) -> Snapshot:
        """Reads every node: ``INFO ratelimit`` (and ``RL.TOP COUNT n``), one round trip each,
        without the timeout."""
        return _snapshot(await self._node_replies(), self.top_keys)

    async def refresh(self) -> bool:
        """Reads the servers for the next :meth:`collect`, waiting at most ``timeout``;
        ``True`` when every node answered. A read still late from an earlier refresh is waited
        for again rather than repeated."""
        loop = asyncio.get_running_loop()
        if self._reading is None or self._reading.done() or self._reading.get_loop() is not loop:
            self._reading = asyncio.ensure_future(self.scrape())
        try:
            self._last = await asyncio.wait_for(asyncio.shield(self._reading), self.timeout)
        except (RedisError, OSError, asyncio.TimeoutError):
            self._last = None
            if self._reading.done() and not self._reading.cancelled():
                self._reading.exception()  # retrieved: not logged as never retrieved
            return False
        return True

    def collect(self) -> Iterable[Metric]:
        last = self._last
        return self._families(None, up=0) if last is None else self._families(last)

    def asgi_app(self, registry: CollectorRegistry = REGISTRY) -> Callable[..., Awaitable[None]]:
        """An ASGI application serving ``registry`` in Prometheus' text format, refreshing this
        collector first (mount it at ``/metrics``)."""

        async def app(scope: Dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
            if scope.get("type") != "http":
                return
            await self.refresh()
            body = generate_latest(registry)
            headers = [(b"content-type", CONTENT_TYPE_LATEST.encode()), (b"content-length", str(len(body)).encode())]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": body})

        return app


def _families(s: Union[Snapshot, None], up: int, top_keys: int) -> Iterator[Metric]:
    """Every metric family of one scrape: ``s`` the servers' counters (``None``: none)."""
    yield GaugeMetricFamily("ratelimit_up", "Whether every node answered the last scrape (1) or not (0)", up)
    decisions = CounterMetricFamily(
        "ratelimit_decisions",
        "Limiting calls the module decided, by command and outcome (admitted, limited)",
        labels=["command", "outcome"],
    )
    calls = CounterMetricFamily("ratelimit_calls", "Calls of each module command, errors included", labels=["command"])
    errors = CounterMetricFamily(
        "ratelimit_errors", "Calls of each module command answered with an error", labels=["command"]
    )
    policy = CounterMetricFamily(
        "ratelimit_policy_decisions",
        "Decisions per server policy (RL.HIT) by outcome (admitted, limited, shadow_limited, near_limit)",
        labels=["policy", "outcome"],
    )
    candidate = CounterMetricFamily(
        "ratelimit_policy_candidate_decisions",
        "What a policy's candidate (evaluated in shadow beside it) decided, by outcome (admitted, limited, near_limit)",
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
            if "candidate_calls" in stats:
                for outcome in CANDIDATE_OUTCOMES:
                    candidate.add_metric([name, outcome], stats.get(f"candidate_{outcome}", 0))
    if s or up:
        yield from (decisions, calls, errors, policy, candidate)
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
        if top_keys:
            keys = GaugeMetricFamily(
                "ratelimit_top_key_refused",
                f"Refusals of the {top_keys} most refused keys now (RL.TOP)",
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

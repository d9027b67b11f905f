"""ASGI middleware (Starlette, FastAPI): one module command per HTTP request.

    app.add_middleware(
        RateLimitMiddleware,
        client=AsyncRateLimit(redis_client),          # or any redis.asyncio client
        limit=Token(100, 10, "1s"),
        key=lambda request: request.headers.get("x-api-key"),   # None: not limited
        cost=lambda request: 1,
    )

Admitted responses carry ``RateLimit-Policy`` and ``RateLimit`` (draft-ietf-httpapi-ratelimit-
headers-10); refused requests get ``429 Too Many Requests`` with the same fields and
``Retry-After`` (seconds, rounded up), and never reach the application. A request waits at most
``timeout`` (default 0.5 s) for Redis; when Redis fails or is too slow the request gets ``503``
(fail closed), or with ``fail_open`` goes through unlimited, and the cause is logged (logger
``redis_ratelimit``, warning). Needs ``starlette``.

The default key is the client's address as :func:`redis_ratelimit.addresses.address_key` gives
it (IPv6 by its /56), with the prefix ``ratelimit:`` — on a server policy exactly the key the
Node and Go middlewares write for the same client (``docs/clients.md``, "Keys").
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
import weakref
from typing import Any, Awaitable, Callable, Dict, List, Optional, Tuple, Union, cast

import redis.asyncio
import redis.asyncio.cluster
from redis.exceptions import BusyLoadingError, RedisError
from redis.exceptions import ConnectionError as RedisConnectionError
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .addresses import DEFAULT_IPV6_SUBNET, address_key, check_subnet
from .aio import AsyncRateLimit, AsyncRateLimitCluster, AsyncRateLimitCommands
from .commands import deadline_passed
from .decision import Decision
from .outcomes import count_decision
from .specs import Leaky, Limit, flag

logger = logging.getLogger("redis_ratelimit")

KeyFunction = Callable[[Request], Union[Optional[Union[str, bytes]], Awaitable[Optional[Union[str, bytes]]]]]
CostFunction = Callable[[Request], Union[int, Awaitable[int]]]

#: How long a request waits for Redis by default before it is answered without it (seconds).
DEFAULT_TIMEOUT_S = 0.5

#: The default key prefix: the key is ``ratelimit:`` + the tenant (docs/clients.md, "Keys").
DEFAULT_PREFIX = "ratelimit:"

#: How long a server policy's definition (the ``w`` of ``RateLimit-Policy``) is reused (seconds).
POLICY_CACHE_S = 5.0


def client_address(request: Request, ipv6_subnet: Optional[int] = DEFAULT_IPV6_SUBNET) -> Optional[str]:
    """The default key: the peer address of the connection as
    :func:`~redis_ratelimit.addresses.address_key` gives it — IPv4 as is, IPv4-mapped IPv6 as
    IPv4, other IPv6 by its ``/56`` (behind a proxy, pass a key function that reads the header
    your proxy sets)."""
    return address_key(request.client.host, ipv6_subnet) if request.client else None


def window_of(definition: Optional[Dict[str, Any]]) -> Optional[Tuple[int, int]]:
    """A server policy's quota and window in whole seconds (rounded up) from its
    ``RL.POLICY GET`` fields, or ``None`` when they do not say."""
    if not definition:
        return None

    def number(name: str) -> Optional[int]:
        value = definition.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None

    algorithm = definition.get("algorithm")
    if algorithm in ("token", "leaky"):
        capacity, rate, period_ms = number("capacity"), number("rate"), number("period_ms")
        if capacity is None or not rate or period_ms is None:
            return None
        return capacity, -(-(capacity * period_ms) // (rate * 1000))
    if algorithm in ("period", "slide"):
        limit, span = number("limit"), number("period_ms" if algorithm == "period" else "window_ms")
        if limit is None or span is None:
            return None
        return limit, -(-span // 1000)
    return None


def _one(request: Request) -> int:
    return 1


def _typed_client(client: object) -> AsyncRateLimitCommands:
    """The client as one with the module's commands: this package's asyncio clients as they
    are, a redis-py asyncio client or pool wrapped; a sync client is refused (it would block
    the event loop)."""
    if isinstance(client, AsyncRateLimitCommands):
        return client
    if isinstance(client, redis.asyncio.cluster.RedisCluster):
        return AsyncRateLimitCluster(client)
    if isinstance(client, (redis.asyncio.Redis, redis.asyncio.ConnectionPool)):
        return AsyncRateLimit(client)
    raise TypeError(
        "RateLimitMiddleware needs an asyncio client (AsyncRateLimit, AsyncRateLimitCluster, or a "
        f"redis.asyncio client to wrap), got {type(client).__module__}.{type(client).__qualname__}"
    )


def _forget_connections(client: Any) -> None:
    """Drops the client's idle connections without closing them: they belong to an event loop
    that has ended (a second ``with TestClient(app)``, a new ``asyncio.run``), where closing
    them would fail. New ones are made in the running loop."""
    pool = getattr(client, "connection_pool", None)
    if pool is not None and hasattr(pool, "reset"):
        pool.reset()
    manager = getattr(client, "nodes_manager", None)
    for nodes in (getattr(manager, "nodes_cache", {}), getattr(manager, "startup_nodes", {})):
        for node in list(nodes.values()):
            for name in ("_connections", "_free"):
                held = getattr(node, name, None)
                if held is not None:
                    held.clear()


class RateLimitMiddleware:
    """Limits every HTTP request by ``limit`` on ``prefix + key(request)``, costing
    ``cost(request)`` (both may be coroutines; a ``bytes`` key is used as is). ``key``
    returning ``None`` lets the request through unlimited (health checks, internal callers).

    ``timeout`` (seconds, default 0.5; ``None``: as long as the client takes): how long a
    request waits for Redis; each call carries ``DEADLINE`` now + ``timeout``, so a call the
    server runs after that (queued behind a stall) counts nothing. When Redis fails, cannot be
    reached or does not answer in time, the request gets ``503 Service Unavailable`` (fail
    closed), unless ``fail_open``: then it goes through unlimited and without rate-limit fields.

    Each failure is logged (logger ``redis_ratelimit``, warning, at most a line a second with
    the count): the cause — refused connection, timeout, an unknown policy, a missing ACL
    permission. A call whose connection turns out closed (after a Redis restart) is sent once
    more at once on a new connection, within ``timeout``, as redis-py 6+ does by default: a
    restart costs no request once the server is back. (A server that crashed after counting
    the call and before answering counts it twice: one permit.) Timeouts are not retried.

    A :class:`Leaky` limit in delay mode (without ``nodelay``) delays each admitted request
    until the water ahead of it has drained (``asyncio.sleep``, nginx ``limit_req``), so
    admitted requests reach the application at the bucket's rate.

    ``policy``: the policy name in the headers (default ``"default"``). Given without a
    ``limit``, the server's policy of that name is the limit: each request is ``RL.HIT policy
    key`` (docs/policies.md), so the limit changes with the policy, without a deploy; no delay
    mode then (a shadow policy's admitted requests carry a retry time). The policy's window
    (``w``) is read with ``RL.POLICY GET`` beside the first request and reused for
    :data:`POLICY_CACHE_S` seconds (refreshed in the background): one module command per
    request.

    ``ipv6_subnet``: the IPv6 prefix length of the default key (default 56; ``None``: the full
    address)."""

    def __init__(
        self,
        app: ASGIApp,
        client: Union[AsyncRateLimitCommands, redis.asyncio.Redis, redis.asyncio.cluster.RedisCluster],
        limit: Optional[Limit] = None,
        key: Optional[KeyFunction] = None,
        cost: CostFunction = _one,
        prefix: str = DEFAULT_PREFIX,
        policy: Optional[str] = None,
        fail_open: bool = False,
        timeout: Optional[float] = DEFAULT_TIMEOUT_S,
        ipv6_subnet: Optional[int] = DEFAULT_IPV6_SUBNET,
    ) -> None:
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds or None, got {timeout!r}")
        if limit is None and policy is None:
            raise TypeError("RateLimitMiddleware needs a limit, or a policy (the server's, by name)")
        check_subnet(ipv6_subnet)
        self.app = app
        self.client = _typed_client(client)
        self.limit = limit
        subnet = ipv6_subnet
        self.key: KeyFunction = key if key is not None else (lambda request: client_address(request, subnet))
        self.cost = cost
        self.prefix = prefix
        self.policy = "default" if policy is None else policy
        self.server_policy = policy if limit is None else None
        self.fail_open = flag(fail_open, "fail_open")
        self.timeout = timeout
        # The server policy's (quota, window in s), when read; when it was read (monotonic s).
        self._policy_window: Optional[Tuple[int, int]] = None
        self._policy_read_at: Optional[float] = None
        self._policy_reading: Optional[asyncio.Future[None]] = None
        # Failures since the last warning, and when it was logged (monotonic s).
        self._failures = 0
        self._failure_logged_at: Optional[float] = None
        self.delays = isinstance(limit, Leaky) and not limit.nodelay
        window_ms = None if limit is None else limit.window_ms()
        self.window_s = None if window_ms is None else -(-window_ms // 1000)
        self._loop: Optional[weakref.ref[asyncio.AbstractEventLoop]] = None

    def _full_key(self, key: Union[str, bytes, object]) -> Union[str, bytes]:
        if isinstance(key, bytes):
            return self.prefix.encode() + key
        return self.prefix + str(key)

    def _bind_to_running_loop(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is not None and self._loop() is not loop:
            _forget_connections(self.client)
            self._policy_reading = None  # a read of the ended loop never finishes
        self._loop = weakref.ref(loop)

    async def _read_policy(self, name: str) -> None:
        """Reads the server policy's definition for ``w``; a failure (no such policy yet, an ACL
        user without ``RL.POLICY GET``, a timeout) leaves ``w`` out until the next read."""
        try:
            call = self.client.get_policy(name)
            definition = await (call if self.timeout is None else asyncio.wait_for(call, self.timeout))
            self._policy_window = window_of(definition)
        except (RedisError, OSError, asyncio.TimeoutError) as error:
            logger.debug("RL.POLICY GET %s failed (%s): RateLimit-Policy without w", name, error)
            self._policy_window = None
        finally:
            self._policy_read_at = time.monotonic()
            self._policy_reading = None

    def _policy_read(self, name: str) -> Optional[asyncio.Future[None]]:
        """The read of the policy's definition to wait for (the first), else ``None``; a stale
        one is refreshed in the background."""
        if self._policy_reading is not None:
            return self._policy_reading if self._policy_read_at is None else None
        if self._policy_read_at is not None and time.monotonic() - self._policy_read_at < POLICY_CACHE_S:
            return None
        self._policy_reading = asyncio.ensure_future(self._read_policy(name))
        return self._policy_reading if self._policy_read_at is None else None

    async def _decide(self, key: Union[str, bytes], cost: int) -> Decision:
        self._bind_to_running_loop()
        # The instant this request stops waiting: a call the server runs later (queued behind a
        # stall) counts nothing (issue 31, defect 8).
        deadline = None if self.timeout is None else int(time.time() * 1000 + self.timeout * 1000)
        first_read = None if self.server_policy is None else self._policy_read(self.server_policy)
        call = self._judge_retrying_a_closed_connection(key, cost, deadline)
        decided = call if self.timeout is None else asyncio.wait_for(call, self.timeout)
        if first_read is None:
            return await decided
        decision, _ = await asyncio.gather(decided, first_read)
        return decision

    def _log_failure(self, error: BaseException) -> None:
        """Says why a request was answered without Redis (logger ``redis_ratelimit``, warning):
        the first failure at once, then at most one line a second with how many there were."""
        now = time.monotonic()
        self._failures += 1
        if self._failure_logged_at is not None and now - self._failure_logged_at < 1.0:
            return
        if isinstance(error, asyncio.TimeoutError) or deadline_passed(error):
            cause = f"no reply from Redis within {self.timeout} s"
        else:
            cause = f"{type(error).__name__}: {error}"
        logger.warning(
            "RateLimitMiddleware(policy=%r): %s — %d request(s) %s since the last report",
            self.policy,
            cause,
            self._failures,
            "let through unlimited (fail_open)" if self.fail_open else "answered 503",
        )
        self._failures = 0
        self._failure_logged_at = now

    async def _judge(self, key: Union[str, bytes], cost: int, deadline: Optional[int]) -> Decision:
        if self.server_policy is not None:
            return await self.client.hit(self.server_policy, key, cost=cost, deadline=deadline)
        return await self.client.apply(key, cast(Limit, self.limit), cost=cost, deadline=deadline)

    async def _judge_retrying_a_closed_connection(
        self, key: Union[str, bytes], cost: int, deadline: Optional[int]
    ) -> Decision:
        """The decision; sent once more at once, on a new connection, when its connection turns
        out closed. A Redis restart leaves every pooled connection dead, and a client that does
        not retry (redis-py before 6, or ``retry`` without retries) reports that on the first
        call of each: one 503 per stale connection otherwise (issue 31, defect 7). A timeout is
        never sent again (the call may still run; its ``DEADLINE`` makes it count nothing then),
        nor a server still loading."""
        try:
            return await self._judge(key, cost, deadline)
        except RedisConnectionError as error:
            if isinstance(error, BusyLoadingError):
                raise
            logger.info("RateLimitMiddleware(policy=%r): %s; sending the call again", self.policy, error)
            return await self._judge(key, cost, deadline)

    def _window_s(self, decision: Decision) -> Optional[int]:
        """``w`` of ``RateLimit-Policy``: the limit's own window, or the server policy's when the
        reply is under it (a key's override of another quota: left out)."""
        if self.server_policy is None:
            return self.window_s
        known = self._policy_window
        return known[1] if known is not None and known[0] == decision.limit else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        key = self.key(request)
        if inspect.isawaitable(key):
            key = await key
        if key is None:
            await self.app(scope, receive, send)
            return
        cost = self.cost(request)
        if inspect.isawaitable(cost):
            cost = await cost
        try:
            decision = await self._decide(self._full_key(key), int(cost))
        except (RedisError, OSError, asyncio.TimeoutError) as error:
            count_decision(self.policy, "error")
            self._log_failure(error)
            if self.fail_open:
                await self.app(scope, receive, send)
                return
            await JSONResponse({"error": "rate limiter unavailable"}, status_code=503, headers={"Retry-After": "1"})(
                scope, receive, send
            )
            return
        count_decision(self.policy, "admitted" if decision.allowed else "limited")
        fields = decision.headers(self.policy, self._window_s(decision))
        if not decision.allowed:
            body: Dict[str, object] = {"error": "too many requests", "retry_after_ms": decision.retry_after_ms}
            await JSONResponse(body, status_code=429, headers=fields)(scope, receive, send)
            return
        if self.delays and decision.retry_after_ms > 0:
            await asyncio.sleep(decision.retry_after_ms / 1000)
        extra: List[Tuple[bytes, bytes]] = [(k.lower().encode(), v.encode()) for k, v in fields.items()]

        async def send_with_fields(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_fields)

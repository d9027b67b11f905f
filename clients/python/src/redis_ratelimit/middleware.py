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
(fail closed), or with ``fail_open`` goes through unlimited. Needs ``starlette``.
"""

from __future__ import annotations

import asyncio
import inspect
import weakref
from typing import Any, Awaitable, Callable, Dict, List, Optional, Tuple, Union, cast

import redis.asyncio
import redis.asyncio.cluster
from redis.exceptions import RedisError
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .aio import AsyncRateLimit, AsyncRateLimitCluster, AsyncRateLimitCommands
from .decision import Decision
from .outcomes import count_decision
from .specs import Leaky, Limit

KeyFunction = Callable[[Request], Union[Optional[Union[str, bytes]], Awaitable[Optional[Union[str, bytes]]]]]
CostFunction = Callable[[Request], Union[int, Awaitable[int]]]

#: How long a request waits for Redis by default before it is answered without it (seconds).
DEFAULT_TIMEOUT_S = 0.5


def client_address(request: Request) -> Optional[str]:
    """The default key: the peer address of the connection (behind a proxy, pass a key
    function that reads the header your proxy sets)."""
    return request.client.host if request.client else None


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
    request waits for Redis. When Redis fails, cannot be reached or does not answer in time,
    the request gets ``503 Service Unavailable`` (fail closed), unless ``fail_open``: then it
    goes through unlimited and without rate-limit fields.

    A :class:`Leaky` limit in delay mode (without ``nodelay``) delays each admitted request
    until the water ahead of it has drained (``asyncio.sleep``, nginx ``limit_req``), so
    admitted requests reach the application at the bucket's rate.

    ``policy``: the policy name in the headers (default ``"default"``). Given without a
    ``limit``, the server's policy of that name is the limit: each request is ``RL.HIT policy
    key`` (docs/policies.md), so the limit changes with the policy, without a deploy; no delay
    mode then (a shadow policy's admitted requests carry a retry time)."""

    def __init__(
        self,
        app: ASGIApp,
        client: Union[AsyncRateLimitCommands, redis.asyncio.Redis, redis.asyncio.cluster.RedisCluster],
        limit: Optional[Limit] = None,
        key: KeyFunction = client_address,
        cost: CostFunction = _one,
        prefix: str = "ratelimit:",
        policy: Optional[str] = None,
        fail_open: bool = False,
        timeout: Optional[float] = DEFAULT_TIMEOUT_S,
    ) -> None:
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds or None, got {timeout!r}")
        if limit is None and policy is None:
            raise TypeError("RateLimitMiddleware needs a limit, or a policy (the server's, by name)")
        self.app = app
        self.client = _typed_client(client)
        self.limit = limit
        self.key = key
        self.cost = cost
        self.prefix = prefix
        self.policy = "default" if policy is None else policy
        self.server_policy = policy if limit is None else None
        self.fail_open = fail_open
        self.timeout = timeout
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
        self._loop = weakref.ref(loop)

    async def _decide(self, key: Union[str, bytes], cost: int) -> Decision:
        self._bind_to_running_loop()
        if self.server_policy is not None:
            call = self.client.hit(self.server_policy, key, cost=cost)
        else:
            call = self.client.apply(key, cast(Limit, self.limit), cost=cost)
        if self.timeout is None:
            return await call
        return await asyncio.wait_for(call, self.timeout)

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
        except (RedisError, OSError, asyncio.TimeoutError):
            count_decision(self.policy, "error")
            if self.fail_open:
                await self.app(scope, receive, send)
                return
            await JSONResponse({"error": "rate limiter unavailable"}, status_code=503, headers={"Retry-After": "1"})(
                scope, receive, send
            )
            return
        count_decision(self.policy, "admitted" if decision.allowed else "limited")
        fields = decision.headers(self.policy, self.window_s)
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

"""ASGI middleware (Starlette, FastAPI): one module command per HTTP request.

    app.add_middleware(
        RateLimitMiddleware,
        client=AsyncRateLimit.from_url("redis://localhost:6379"),
        limit=Token(100, 10, "1s"),
        key=lambda request: request.headers.get("x-api-key"),   # None: not limited
        cost=lambda request: 1,
    )

Admitted responses carry ``RateLimit-Policy`` and ``RateLimit`` (draft-ietf-httpapi-ratelimit-
headers-10); refused requests get ``429 Too Many Requests`` with the same fields and
``Retry-After`` (seconds, rounded up), and never reach the application. Needs ``starlette``.
"""

from __future__ import annotations

import inspect
from typing import Awaitable, Callable, List, Optional, Tuple, Union

from redis.exceptions import RedisError
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .aio import AsyncRateLimitCommands
from .outcomes import count_decision
from .specs import Limit

KeyFunction = Callable[[Request], Union[Optional[str], Awaitable[Optional[str]]]]
CostFunction = Callable[[Request], Union[int, Awaitable[int]]]


def client_address(request: Request) -> Optional[str]:
    """The default key: the peer address of the connection (behind a proxy, pass a key
    function that reads the header your proxy sets)."""
    return request.client.host if request.client else None


def _one(request: Request) -> int:
    return 1


class RateLimitMiddleware:
    """Limits every HTTP request by ``limit`` on ``prefix + key(request)``, costing
    ``cost(request)`` (both may be coroutines). ``key`` returning ``None`` lets the request
    through unlimited (health checks, internal callers). When Redis cannot be reached the
    error propagates (the request fails), unless ``fail_open``: then the request goes through
    unlimited and without rate-limit fields."""

    def __init__(
        self,
        app: ASGIApp,
        client: AsyncRateLimitCommands,
        limit: Limit,
        key: KeyFunction = client_address,
        cost: CostFunction = _one,
        prefix: str = "ratelimit:",
        policy: str = "default",
        fail_open: bool = False,
    ) -> None:
        self.app = app
        self.client = client
        self.limit = limit
        self.key = key
        self.cost = cost
        self.prefix = prefix
        self.policy = policy
        self.fail_open = fail_open
        window_ms = limit.window_ms()
        self.window_s = None if window_ms is None else -(-window_ms // 1000)

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
            decision = await self.client.apply(self.prefix + str(key), self.limit, cost=int(cost))
        except (RedisError, OSError):
            count_decision(self.policy, "error")
            if not self.fail_open:
                raise
            await self.app(scope, receive, send)
            return
        count_decision(self.policy, "admitted" if decision.allowed else "limited")
        fields = decision.headers(self.policy, self.window_s)
        if not decision.allowed:
            body = {"error": "too many requests", "retry_after_ms": decision.retry_after_ms}
            await JSONResponse(body, status_code=429, headers=fields)(scope, receive, send)
            return
        extra: List[Tuple[bytes, bytes]] = [(k.lower().encode(), v.encode()) for k, v in fields.items()]

        async def send_with_fields(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_fields)

"""The application's ACL user exactly as ``docs/operations.md`` ("The application's user") writes
it runs everything the package does (issue 31, defect 11): the middleware on a server policy
(``RL.HIT``, ``RL.POLICY GET`` for ``w``) and on a limit of its own, both Prometheus collectors
(``INFO``, ``RL.TOP``: ``ratelimit_up 1``) and a permit block (``COST size``, then
``RL.REFUND``); it cannot change a policy nor reach keys outside ``~ratelimit:*``. On Redis 7.0
the by-name line is used; on every later server both lines are."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Dict, Iterator

import pytest
import redis
import redis.asyncio
from conftest import Server
from prometheus_client import CollectorRegistry, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from redis_ratelimit import AsyncRateLimit, Period, PermitBlock, RateLimit, Token
from redis_ratelimit.middleware import RateLimitMiddleware
from redis_ratelimit.prometheus import AsyncRateLimitCollector, RateLimitCollector

DOC = Path(__file__).resolve().parents[3] / "docs" / "operations.md"


def documented_lines() -> Dict[str, str]:
    """The ``ACL SETUSER app …`` lines of the application's user, by the comment above each."""
    section = DOC.read_text().split("### The application's user", 1)[1]
    match = re.search(r"```\n(.*?)```", section, re.S)
    assert match, "docs/operations.md: no code block under The application's user"
    block = match.group(1).splitlines()
    lines = {c: line for c, line in zip(block, block[1:]) if c.startswith("#") and line.startswith("ACL SETUSER app ")}
    modern = [line for c, line in lines.items() if "7.2+" in c]
    old = [line for c, line in lines.items() if "7.0" in c]
    assert len(modern) == 1 and len(old) == 1, lines
    return {"modern": modern[0], "old": old[0]}


def samples(registry: CollectorRegistry) -> Dict[str, float]:
    out: Dict[str, float] = {}
    for line in generate_latest(registry).decode().splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


@pytest.fixture
def own_server() -> Iterator[Server]:
    s = Server()
    yield s
    s.stop()


def test_the_documented_application_user(own_server: Server) -> None:
    admin = RateLimit(port=own_server.port)
    server_info = admin.info("server")
    is_70 = str(server_info["redis_version"]).startswith("7.0.") and "valkey_version" not in server_info
    lines = documented_lines()
    admin.set_policy("free", Period(3, "1m"))
    for line in [lines["old"]] if is_70 else [lines["modern"], lines["old"]]:
        admin.execute_command("ACL", "DELUSER", "app")
        assert admin.execute_command(*line.split()) in (b"OK", "OK", True), line
        password = re.search(r"\s>(\S+)", line)
        assert password
        auth = {"port": own_server.port, "username": "app", "password": password.group(1)}
        admin.execute_command("RL.TOP", "RESET")
        tenant = f"acl-{len(line)}"

        async def hello(request: Request) -> PlainTextResponse:
            return PlainTextResponse("hello")

        app = Starlette(routes=[Route("/", hello)])
        app.add_middleware(RateLimitMiddleware, client=AsyncRateLimit(**auth), policy="free", key=lambda _, t=tenant: t)
        with TestClient(app) as http:
            replies = [http.get("/") for _ in range(4)]
            assert [reply.status_code for reply in replies] == [200, 200, 200, 429], line
            assert http.get("/").headers["ratelimit-policy"] == '"free";q=3;w=60', "RL.POLICY GET granted"
        own = Starlette(routes=[Route("/", hello)])
        own.add_middleware(RateLimitMiddleware, client=AsyncRateLimit(**auth), limit=Token(2, 1, "1m"))
        with TestClient(own) as http:
            assert http.get("/").status_code == 200

        registry = CollectorRegistry()
        registry.register(RateLimitCollector(redis.Redis(**auth), top_keys=5))
        s = samples(registry)
        assert s["ratelimit_up"] == 1, f"{line}: INFO and RL.TOP granted"
        assert s[f'ratelimit_top_key_refused{{key="ratelimit:{tenant}"}}'] == 2

        async def scrape_async(auth: Dict[str, object]) -> Dict[str, float]:
            client = redis.asyncio.Redis(**auth)  # type: ignore[arg-type]
            collector = AsyncRateLimitCollector(client, top_keys=5)
            async_registry = CollectorRegistry()
            async_registry.register(collector)
            assert await collector.refresh()
            await client.aclose()
            return samples(async_registry)

        assert asyncio.run(scrape_async(auth))["ratelimit_up"] == 1

        key = f"ratelimit:global:{len(line)}"
        block = PermitBlock(RateLimit(**auth), key, Token(100, 1, "1h"), size=10)
        for _ in range(3):
            assert block.take().allowed
        block.close()  # gives the 7 unused permits back: RL.REFUND
        info = admin.limiter_info(key)
        assert info is not None and info["tokens"] == 97, "the unused permits were refunded"

        app_client = RateLimit(**auth)
        with pytest.raises(redis.exceptions.NoPermissionError):
            app_client.set_policy("free", Period(1000, "1m"))
        with pytest.raises(redis.exceptions.NoPermissionError):
            app_client.token("other:key", 1, 1, "1s")
        app_client.close()

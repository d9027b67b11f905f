"""Helpers for issue 39's tests: a waiting call whose connection the server drops, and what the
servers say of it afterwards (not sent again: not waiting, not admitted)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Awaitable, Callable, List, Optional

import redis
from conftest import Server

DEADLINE_S = 10


def stat(nodes: List[Server], field: str) -> int:
    """An INFO ratelimit counter summed over the servers."""
    return sum(int(redis.Redis(port=n.port).info("ratelimit")[field]) for n in nodes)


def _waiting(nodes: List[Server]) -> Optional[redis.Redis]:
    """A client of the server where a call waits, if one does."""
    for n in nodes:
        raw = redis.Redis(port=n.port)
        if int(raw.info("ratelimit")["ratelimit_waiting"]) >= 1:
            return raw
    return None


def _kill_clients(raw: redis.Redis) -> None:
    assert raw.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes") >= 1


def _nothing_counted_twice(nodes: List[Server], outcome: List[object], waited: int) -> None:
    """The dropped call raised, and no copy of it waits or was admitted."""
    assert len(outcome) == 1 and isinstance(outcome[0], redis.ConnectionError), outcome
    time.sleep(1.2)  # past the 1 s refill a second copy would have waited for
    assert stat(nodes, "ratelimit_waiting") == 0, "sent again"
    assert stat(nodes, "ratelimit_wait_admitted") == waited, "sent again, and admitted"


def dropped_while_waiting(nodes: List[Server], take: Callable[[], Any], wait: Callable[[], Any]) -> None:
    """``take()`` empties a 1-per-second key, ``wait()`` waits on it; the servers drop its
    connection once it waits: it raises ``ConnectionError``, and is not sent again."""
    take()
    waited = stat(nodes, "ratelimit_wait_admitted")
    outcome: List[object] = []

    def run() -> None:
        try:
            outcome.append(wait())
        except Exception as error:  # noqa: BLE001 - the test reads which
            outcome.append(error)

    waiter = threading.Thread(target=run)
    waiter.start()
    deadline = time.monotonic() + DEADLINE_S
    while (raw := _waiting(nodes)) is None:
        assert time.monotonic() < deadline and waiter.is_alive(), f"the call never queued: {outcome}"
        time.sleep(0.01)
    _kill_clients(raw)
    waiter.join(DEADLINE_S)
    _nothing_counted_twice(nodes, outcome, waited)


async def async_dropped_while_waiting(
    nodes: List[Server], take: Callable[[], Awaitable[Any]], wait: Callable[[], Awaitable[Any]]
) -> None:
    """:func:`dropped_while_waiting` for an asyncio client."""
    await take()
    waited = stat(nodes, "ratelimit_wait_admitted")
    outcome: List[object] = []

    async def run() -> None:
        try:
            outcome.append(await wait())
        except Exception as error:  # noqa: BLE001 - the test reads which
            outcome.append(error)

    waiter = asyncio.create_task(run())
    deadline = time.monotonic() + DEADLINE_S
    while (raw := _waiting(nodes)) is None:
        assert time.monotonic() < deadline and not waiter.done(), f"the call never queued: {outcome}"
        await asyncio.sleep(0.01)
    _kill_clients(raw)
    await asyncio.wait_for(waiter, DEADLINE_S)
    _nothing_counted_twice(nodes, outcome, waited)

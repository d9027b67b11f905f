"""The typed asyncio clients: :class:`AsyncRateLimit` (a ``redis.asyncio.Redis``) and
:class:`AsyncRateLimitCluster` (a ``redis.asyncio.cluster.RedisCluster``). The same methods as
the sync clients (:mod:`redis_ratelimit.client`), as coroutines; one command each.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union, cast

import redis.asyncio
import redis.asyncio.cluster
from redis.exceptions import ResponseError

from . import commands as cmd
from .decision import AllDecision, Decision, LeaseDecision
from .specs import Arg, Duration, Leaky, Limit, Period, Slide, Token

Key = Union[str, bytes]


class AsyncRateLimitCommands:
    """The module's commands for a redis-py asyncio client (a mixin over ``execute_command``)."""

    async def _send(self, *args: Arg) -> Any:
        try:
            return await cast(Any, self).execute_command(*args)
        except ResponseError as error:
            missing = cmd.module_missing(error, str(args[0]))
            if missing is not None:
                raise missing from error
            raise

    async def apply(
        self,
        key: Key,
        limit: Limit,
        *,
        cost: int = 1,
        ban: Optional[Duration] = None,
        wait: Optional[Duration] = None,
        dryrun: bool = False,
        at: Optional[int] = None,
    ) -> Decision:
        """One request of ``cost`` against ``limit`` (a :class:`Token`, :class:`Period`,
        :class:`Slide` or :class:`Leaky`) on ``key``. ``ban``: refused requests start a ban of
        that long; ``wait``: block in the server until admitted, at most that long (the
        client's socket timeout must exceed it); ``dryrun``: change nothing; ``at``: unix ms to
        judge at instead of the server clock."""
        return cmd.decision(await self._send(*cmd.limiting(key, limit, cost, ban, wait, dryrun, at)))

    async def token(
        self,
        key: Key,
        capacity: int,
        rate: int,
        period: Duration,
        *,
        step: bool = False,
        cost: int = 1,
        ban: Optional[Duration] = None,
        wait: Optional[Duration] = None,
        dryrun: bool = False,
        at: Optional[int] = None,
    ) -> Decision:
        """``RL.TOKEN``: token bucket of ``capacity``, ``rate`` tokens per ``period``."""
        return await self.apply(
            key, Token(capacity, rate, period, step), cost=cost, ban=ban, wait=wait, dryrun=dryrun, at=at
        )

    async def period(
        self,
        key: Key,
        limit: int,
        period: Duration,
        *,
        align: Union[bool, Duration] = False,
        cost: int = 1,
        ban: Optional[Duration] = None,
        wait: Optional[Duration] = None,
        dryrun: bool = False,
        at: Optional[int] = None,
    ) -> Decision:
        """``RL.PERIOD``: fixed window of ``limit`` per ``period`` (``align``: calendar windows)."""
        return await self.apply(key, Period(limit, period, align), cost=cost, ban=ban, wait=wait, dryrun=dryrun, at=at)

    async def slide(
        self,
        key: Key,
        limit: int,
        window: Duration,
        *,
        buckets: Optional[int] = None,
        cost: int = 1,
        ban: Optional[Duration] = None,
        wait: Optional[Duration] = None,
        dryrun: bool = False,
        at: Optional[int] = None,
    ) -> Decision:
        """``RL.SLIDE``: at most ``limit`` in any ``window`` (exact log, or ``buckets`` counters)."""
        return await self.apply(key, Slide(limit, window, buckets), cost=cost, ban=ban, wait=wait, dryrun=dryrun, at=at)

    async def leaky(
        self,
        key: Key,
        capacity: int,
        rate: int,
        period: Duration,
        *,
        nodelay: bool = False,
        delay: Optional[int] = None,
        cost: int = 1,
        ban: Optional[Duration] = None,
        wait: Optional[Duration] = None,
        dryrun: bool = False,
        at: Optional[int] = None,
    ) -> Decision:
        """``RL.LEAKY``: leaky bucket of ``capacity`` draining ``rate`` per ``period``."""
        spec = Leaky(capacity, rate, period, nodelay, delay)
        return await self.apply(key, spec, cost=cost, ban=ban, wait=wait, dryrun=dryrun, at=at)

    async def throttle(
        self,
        key: Key,
        max_burst: int,
        count: int,
        period_s: int,
        quantity: int = 1,
        *,
        dryrun: bool = False,
        at: Optional[int] = None,
    ) -> Decision:
        """``CL.THROTTLE`` (redis-cell's GCRA, ``count`` per ``period_s`` seconds, burst
        ``max_burst``); its seconds are given as ms (× 1000)."""
        return cmd.throttle_decision(
            await self._send(*cmd.throttle(key, max_burst, count, period_s, quantity, dryrun, at))
        )

    async def all(
        self,
        limits: Union[Mapping[Key, Limit], Sequence[Tuple[Key, Limit]]],
        *,
        costs: Optional[Sequence[int]] = None,
        dryrun: bool = False,
        at: Optional[int] = None,
    ) -> AllDecision:
        """``RL.ALL``: every limit admits the request or none is charged (one atomic call).
        ``limits`` maps each key to its limit (at most 16; in a cluster, one hash slot)."""
        return cmd.all_decision(await self._send(*cmd.all_of(limits, costs, dryrun, at)))

    async def refund(self, key: Key, count: int, *, at: Optional[int] = None) -> Optional[Decision]:
        """``RL.REFUND``: give ``count`` permits back; ``None`` if the key holds no limiter."""
        return cmd.optional_decision(await self._send(*cmd.with_at(["RL.REFUND", key, count], at)))

    async def acquire(
        self,
        key: Key,
        limit: int,
        lease: Duration,
        *,
        id: Optional[Union[str, bytes]] = None,
        wait: Optional[Duration] = None,
        dryrun: bool = False,
        at: Optional[int] = None,
    ) -> LeaseDecision:
        """``RL.ACQUIRE``: one of at most ``limit`` leases, lapsing after ``lease`` unless
        renewed (acquire again with its ``id``) or released."""
        return cmd.lease_decision(await self._send(*cmd.acquire(key, limit, lease, id, wait, dryrun, at)))

    async def release(self, key: Key, id: Union[str, bytes], *, at: Optional[int] = None) -> bool:
        """``RL.RELEASE``: ``True`` if the lease was held (and is now gone)."""
        return bool(await self._send(*cmd.with_at(["RL.RELEASE", key, id], at)))

    async def peek(self, key: Key) -> Optional[Decision]:
        """``RL.PEEK``: what a dry-run request of cost 1 would get now; ``None`` if no limiter."""
        return cmd.optional_decision(await self._send("RL.PEEK", key))

    async def limiter_info(self, key: Key) -> Optional[Dict[str, cmd.InfoValue]]:
        """``RL.INFO``: the stored parameters and state; ``None`` if no limiter."""
        return cmd.info(await self._send("RL.INFO", key))


# redis-py's asyncio classes inherit two disagreeing `command_info` stubs (its own typing issue).
class AsyncRateLimit(AsyncRateLimitCommands, redis.asyncio.Redis):  # type: ignore[misc]
    """A ``redis.asyncio.Redis`` with the module's commands (see :class:`AsyncRateLimitCommands`)."""


class AsyncRateLimitCluster(AsyncRateLimitCommands, redis.asyncio.cluster.RedisCluster):  # type: ignore[misc]
    """A ``redis.asyncio.cluster.RedisCluster`` with the module's commands (``RL.ALL``: every
    key in one hash slot — use hash tags)."""

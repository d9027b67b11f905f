"""Permit blocks: a hot key's permits taken from the server ``size`` at a time (one module call
with ``COST size``), handed out locally one by one, and given back (``RL.REFUND``) when the
block's lifetime ends.

A request is admitted only with a permit the server granted before it; the price is permits
held idle by one instance while another is refused, at most blocks × instances × size
(docs/clients.md, "Permit blocks").

- :class:`PermitBlock` over the sync :class:`~redis_ratelimit.RateLimit` (thread-safe: one
  refill in flight, other threads wait for it; a daemon thread refunds blocks as they end);
- :class:`AsyncPermitBlock` over :class:`~redis_ratelimit.AsyncRateLimit` (one refill task in
  flight, other tasks await it; refunds are scheduled on the event loop).

Terms: a *block* is the permits one grant carried, with the instant they stop being usable
(``expires_at``, local monotonic seconds) and the last instant they may still be refunded
(``refund_by``: a fixed window's end less half the guard; no limit for the buckets). A *refill*
is the one grant request in flight.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Set, Tuple, Union

from .decision import Decision
from .specs import Duration, Leaky, Limit, Period, Slide, Throttle, Token, duration_ms

if TYPE_CHECKING:
    from .aio import AsyncRateLimitCommands
    from .client import RateLimitCommands

Key = Union[str, bytes]
#: The limits a block can carry: a token bucket, a fixed window, a leaky bucket with ``nodelay``,
#: GCRA (``CL.THROTTLE``: ``quantity`` takes the block, ``RL.REFUND`` moves the TAT back).
BlockLimit = Union[Token, Period, Leaky, Throttle]

DEFAULT_LIFETIME_MS = 1000
DEFAULT_REFUND_GUARD_MS = 100


def _ms(value: Duration, name: str) -> int:
    ms = duration_ms(value)
    if ms is None or ms < 0:
        raise ValueError(f"{name} must be a duration in ms, a timedelta or text like '1s' (got {value!r})")
    return ms


def _check_limit(limit: Union[Limit, Throttle]) -> BlockLimit:
    if isinstance(limit, Slide):
        raise ValueError(
            "a sliding window cannot carry permit blocks: the server dates a permit at its grant, and "
            "RL.REFUND takes back the newest entries (others' use), so neither late use nor refunds stay exact"
        )
    if isinstance(limit, Leaky) and not limit.nodelay:
        raise ValueError(
            "a leaky bucket carries permit blocks only with nodelay=True (in delay mode each request has its own delay)"
        )
    if not isinstance(limit, (Token, Period, Leaky, Throttle)):
        raise TypeError(f"limit must be a Token, Period, Leaky(nodelay=True) or Throttle (got {limit!r})")
    return limit


@dataclass
class _Block:
    left: int
    expires_at: float
    refund_by: float
    settle_at: float


@dataclass
class BlockStats:
    """Counters: ``calls`` (grant requests sent), ``refunds`` (``RL.REFUND`` sent), ``grants``
    (calls that granted), and permits ``granted``, ``used``, ``refunded``, ``dropped``."""

    calls: int = 0
    refunds: int = 0
    grants: int = 0
    granted: int = 0
    used: int = 0
    refunded: int = 0
    dropped: int = 0


@dataclass
class _Blocks:
    """The held blocks and their rules, without I/O (the caller holds the lock, if any)."""

    size: int
    lifetime_s: float
    refill_below: int
    guard_s: float
    fixed_window: bool
    blocks: List[_Block] = field(default_factory=list)
    stats: BlockStats = field(default_factory=BlockStats)
    limit: int = 0

    def held(self, now: float) -> int:
        return sum(b.left for b in self.blocks if b.expires_at > now)

    def hand_out(self, now: float) -> Optional[Decision]:
        """A permit if an unexpired block has one (an expired one waits for its settling)."""
        self.blocks = [b for b in self.blocks if b.left > 0]
        for b in self.blocks:
            if b.expires_at > now:
                b.left -= 1
                self.stats.used += 1
                reset_ms = max(0, int((b.expires_at - now) * 1000) + 1)
                return Decision(True, self.limit, self.held(now), 0, reset_ms)
        return None

    def wants_prefetch(self, now: float) -> bool:
        return self.refill_below > 0 and self.held(now) <= self.refill_below

    def fallback_cost(self, refused: Decision) -> int:
        """The one smaller request after ``COST size`` was refused: what the server says is left
        (at least 1, to learn a single permit's fate)."""
        return max(1, min(refused.remaining, self.size - 1))

    def add(self, count: int, sent_at: float, reply: Decision, now: float) -> _Block:
        self.stats.grants += 1
        self.stats.granted += count
        expires_at = sent_at + self.lifetime_s
        refund_by = float("inf")
        settle_at = expires_at
        if self.fixed_window:
            # The window ends no earlier than window_end (the server judged after we sent):
            # permits are used only before it, and refunded only while a refund surely lands in
            # it: settled at window_end − guard, sent no later than window_end − guard/2 (the
            # other half is for a late timer), else dropped.
            window_end = sent_at + reply.reset_after_ms / 1000
            expires_at = min(expires_at, window_end)
            refund_by = window_end - self.guard_s / 2
            settle_before = window_end - self.guard_s
            settle_at = min(expires_at, settle_before) if settle_before > now else expires_at
        b = _Block(count, expires_at, refund_by, settle_at)
        self.blocks.append(b)
        return b

    def settle(self, b: _Block, now: float) -> int:
        """Ends block ``b``: the count to refund (0 when nothing is left, or a window's permits
        past ``refund_by``, which are dropped)."""
        if b in self.blocks:
            self.blocks.remove(b)
        n, b.left = b.left, 0
        if n == 0:
            return 0
        if now > b.refund_by:
            self.stats.dropped += n
            return 0
        self.stats.refunded += n
        self.stats.refunds += 1
        return n


def _blocks(
    limit: Union[Limit, Throttle], size: int, lifetime: Duration, refill_below: int, refund_guard: Duration
) -> Tuple[BlockLimit, _Blocks]:
    spec = _check_limit(limit)
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"size must be an int ≥ 1 (got {size!r})")
    if isinstance(spec, Throttle) and size > spec.max_burst + 1:
        raise ValueError(
            f"size must be at most max_burst + 1 = {spec.max_burst + 1} for a GCRA limit: CL.THROTTLE "
            f"refuses a larger quantity whatever the state (got {size!r})"
        )
    if not 0 <= refill_below < size:
        raise ValueError(f"refill_below must be 0 … size − 1 (got {refill_below!r})")
    lifetime_ms = _ms(lifetime, "lifetime")
    if lifetime_ms < 1:
        raise ValueError("lifetime must be at least 1 ms")
    guard_s = _ms(refund_guard, "refund_guard") / 1000
    return spec, _Blocks(size, lifetime_ms / 1000, refill_below, guard_s, isinstance(spec, Period))


class PermitBlock:
    """Permits of ``limit`` on ``key`` taken ``size`` at a time through the sync ``client``.

    ``limit``: a :class:`Token`, a :class:`Period`, a :class:`Leaky` with ``nodelay=True``, or a
    :class:`Throttle` (GCRA; ``size`` at most its ``max_burst + 1``, the most one
    ``CL.THROTTLE`` grants).

    ``lifetime``: a block's longest life (default 1 s; a fixed window's block also ends with its
    window); ``refill_below``: start the next grant at this many held permits or fewer, so a
    process may hold two blocks (default 0: only when empty, one block); ``refund_guard``: a
    fixed window's unused permits are refunded only this long before the window's end, else
    dropped (default 100 ms). Thread-safe. Use as a context manager, or call :meth:`close`.
    """

    def __init__(
        self,
        client: RateLimitCommands,
        key: Key,
        limit: Union[Limit, Throttle],
        *,
        size: int,
        lifetime: Duration = DEFAULT_LIFETIME_MS,
        refill_below: int = 0,
        refund_guard: Duration = DEFAULT_REFUND_GUARD_MS,
    ) -> None:
        self.client = client
        self.key = key
        self.spec, self._state = _blocks(limit, size, lifetime, refill_below, refund_guard)
        self._cond = threading.Condition()
        self._refilling = False
        self._closed = False
        self._refill_error: Optional[BaseException] = None
        self._refill_refusal: Optional[Decision] = None
        self._refill_round = 0
        self._settler: Optional[threading.Thread] = None
        #: called with a refund's error (refunds run on the settling thread)
        self.on_error: Optional[Callable[[BaseException], None]] = None

    @property
    def stats(self) -> BlockStats:
        return self._state.stats

    @property
    def held(self) -> int:
        """Permits held now."""
        with self._cond:
            return self._state.held(time.monotonic())

    def take(self) -> Decision:
        """One decision: a held permit, else the (single, shared) refill's grant. A refusal is
        the server's (its ``retry_after_ms``); ``remaining`` is the permits this instance holds."""
        while True:
            with self._cond:
                if self._closed:
                    raise RuntimeError("PermitBlock is closed")
                now = time.monotonic()
                d = self._state.hand_out(now)
                if d is not None:
                    prefetch = not self._refilling and self._state.wants_prefetch(now)
                    if prefetch:
                        self._refilling = True
                if d is None and self._refilling:
                    # await the refill in flight, then hand out from it (or share its outcome)
                    round_ = self._refill_round
                    while self._refill_round == round_:
                        self._cond.wait()
                    if self._refill_error is not None:
                        raise self._refill_error
                    if self._refill_refusal is not None:
                        return self._refill_refusal
                    continue
                if d is None:
                    self._refilling = True
            if d is not None:
                if prefetch:
                    threading.Thread(target=self._refill_quietly, daemon=True).start()
                return d
            refusal = self._refill()
            if refusal is not None:
                return refusal

    def _refill_quietly(self) -> None:
        try:
            self._refill()
        except Exception:  # noqa: BLE001 - the waiting callers got it; a prefetch has no caller
            pass

    def _ask(self, cost: int) -> Decision:
        with self._cond:
            self._state.stats.calls += 1
        if isinstance(self.spec, Throttle):
            s = self.spec
            return self.client.throttle(self.key, s.max_burst, s.count, s.period_s, cost)
        return self.client.apply(self.key, self.spec, cost=cost)

    def _refill(self) -> Optional[Decision]:
        """The refill (this thread set ``_refilling``): None when a block was added, else the refusal."""
        error: Optional[BaseException] = None
        refusal: Optional[Decision] = None
        try:
            sent_at = time.monotonic()
            cost = self._state.size
            reply = self._ask(cost)
            if not reply.allowed and cost > 1:
                cost = self._state.fallback_cost(reply)
                sent_at = time.monotonic()
                reply = self._ask(cost)
            if reply.allowed:
                with self._cond:
                    self._state.limit = reply.limit
                    self._state.add(cost, sent_at, reply, time.monotonic())
                    self._ensure_settler()
            else:
                refusal = Decision(False, reply.limit, 0, reply.retry_after_ms, reply.reset_after_ms)
        except BaseException as e:
            error = e
        with self._cond:
            self._refilling = False
            self._refill_error = error
            self._refill_refusal = refusal
            self._refill_round += 1
            self._cond.notify_all()
            closed = self._closed
        if closed:
            self._settle_due(all_blocks=True)
        if error is not None:
            raise error
        return refusal

    def _ensure_settler(self) -> None:
        if self._settler is None:
            self._settler = threading.Thread(target=self._settle_loop, name="PermitBlock-settler", daemon=True)
            self._settler.start()
        self._cond.notify_all()

    def _settle_loop(self) -> None:
        while True:
            with self._cond:
                if self._closed:
                    return
                now = time.monotonic()
                nxt = min((b.settle_at for b in self._state.blocks), default=now + 3600)
                if nxt > now:
                    self._cond.wait(nxt - now)
                    continue
            self._settle_due(all_blocks=False)

    def _settle_due(self, all_blocks: bool) -> None:
        with self._cond:
            now = time.monotonic()
            due = [b for b in self._state.blocks if all_blocks or b.settle_at <= now]
            counts = [self._state.settle(b, now) for b in due]
        for n in counts:
            if n > 0:
                try:
                    self.client.refund(self.key, n)
                except Exception as e:
                    if all_blocks:
                        raise
                    if self.on_error is not None:
                        self.on_error(e)

    def close(self) -> None:
        """Stops handing out permits and refunds the unused ones (after a refill in flight)."""
        with self._cond:
            self._closed = True
            while self._refilling:
                self._cond.wait()
            self._cond.notify_all()
        self._settle_due(all_blocks=True)

    def __enter__(self) -> PermitBlock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncPermitBlock:
    """:class:`PermitBlock` for asyncio over :class:`~redis_ratelimit.AsyncRateLimit`: one refill
    task in flight (other tasks await it), refunds scheduled on the running loop. ``async with``,
    or ``await close()``."""

    def __init__(
        self,
        client: AsyncRateLimitCommands,
        key: Key,
        limit: Union[Limit, Throttle],
        *,
        size: int,
        lifetime: Duration = DEFAULT_LIFETIME_MS,
        refill_below: int = 0,
        refund_guard: Duration = DEFAULT_REFUND_GUARD_MS,
    ) -> None:
        self.client = client
        self.key = key
        self.spec, self._state = _blocks(limit, size, lifetime, refill_below, refund_guard)
        self._refill: Optional[asyncio.Future[Optional[Decision]]] = None
        self._closed = False
        self._tasks: Set[asyncio.Task[None]] = set()
        self._timers: Dict[int, asyncio.TimerHandle] = {}
        #: called with a refund's error (refunds run on the loop)
        self.on_error: Optional[Callable[[BaseException], None]] = None

    @property
    def stats(self) -> BlockStats:
        return self._state.stats

    @property
    def held(self) -> int:
        """Permits held now."""
        return self._state.held(time.monotonic())

    async def take(self) -> Decision:
        """One decision (see :meth:`PermitBlock.take`)."""
        while True:
            if self._closed:
                raise RuntimeError("AsyncPermitBlock is closed")
            now = time.monotonic()
            d = self._state.hand_out(now)
            if d is not None:
                if self._refill is None and self._state.wants_prefetch(now):
                    self._start_refill().add_done_callback(lambda f: f.cancelled() or f.exception())
                return d
            refill = self._refill if self._refill is not None else self._start_refill()
            refusal = await asyncio.shield(refill)
            if refusal is not None:
                return refusal

    def _start_refill(self) -> asyncio.Future[Optional[Decision]]:
        task = asyncio.ensure_future(self._grant())
        self._refill = task

        def done(_: object) -> None:
            if self._refill is task:
                self._refill = None

        task.add_done_callback(done)
        return task

    async def _ask(self, cost: int) -> Decision:
        self._state.stats.calls += 1
        if isinstance(self.spec, Throttle):
            s = self.spec
            return await self.client.throttle(self.key, s.max_burst, s.count, s.period_s, cost)
        return await self.client.apply(self.key, self.spec, cost=cost)

    async def _grant(self) -> Optional[Decision]:
        sent_at = time.monotonic()
        cost = self._state.size
        reply = await self._ask(cost)
        if not reply.allowed and cost > 1:
            cost = self._state.fallback_cost(reply)
            sent_at = time.monotonic()
            reply = await self._ask(cost)
        self._state.limit = reply.limit
        if not reply.allowed:
            return Decision(False, reply.limit, 0, reply.retry_after_ms, reply.reset_after_ms)
        now = time.monotonic()
        b = self._state.add(cost, sent_at, reply, now)
        loop = asyncio.get_running_loop()
        self._timers[id(b)] = loop.call_later(max(0.0, b.settle_at - now), self._settle_later, b)
        if self._closed:
            await self._settle_all()
        return None

    def _settle_later(self, b: _Block) -> None:
        self._timers.pop(id(b), None)
        n = self._state.settle(b, time.monotonic())
        if n > 0:
            task = asyncio.ensure_future(self._refund(n))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _refund(self, n: int) -> None:
        try:
            await self.client.refund(self.key, n)
        except Exception as e:
            if self.on_error is not None:
                self.on_error(e)

    async def _settle_all(self) -> None:
        now = time.monotonic()
        counts = [self._state.settle(b, now) for b in list(self._state.blocks)]
        for n in counts:
            if n > 0:
                await self.client.refund(self.key, n)

    async def close(self) -> None:
        """Stops handing out permits and refunds the unused ones (after a refill in flight)."""
        self._closed = True
        if self._refill is not None:
            try:
                await asyncio.shield(self._refill)
            except Exception:  # noqa: BLE001 - its callers got it
                pass
        for t in self._timers.values():
            t.cancel()
        self._timers.clear()
        await self._settle_all()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def __aenter__(self) -> AsyncPermitBlock:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

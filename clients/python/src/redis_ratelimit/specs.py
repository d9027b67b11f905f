"""Limit specifications: the parameters of one limiter, without its key.

They name a limit once (``Token(100, 10, "1s")``) so that it can be passed to
:meth:`RateLimit.apply`, to :meth:`RateLimit.all` beside other limits (one atomic call), and to
the ASGI middleware. Each knows the arguments of its own command. :class:`Throttle` (GCRA,
``CL.THROTTLE``) names a limit for :class:`PermitBlock` only.

Durations (``period``, ``window``, ``ban``, ``wait``) are ``int`` milliseconds, a
:class:`datetime.timedelta` (whole ms), or the module's own duration text (``"1500ms"``,
``"2s"``, ``"1m"``, ``"24h"``, ``"1d"``), passed through unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import List, Optional, Union

#: An argument of a Redis command as redis-py encodes it.
Arg = Union[str, bytes, int]
#: A duration: ms as an ``int``, a ``timedelta``, or the module's text form (``"1m"``).
Duration = Union[int, str, timedelta]


def duration_arg(value: Duration) -> Arg:
    """A duration as the module parses it (a bare integer is ms)."""
    if isinstance(value, timedelta):
        return value // timedelta(milliseconds=1)
    if isinstance(value, bool):
        raise TypeError("a duration must be an int (ms), a str or a timedelta, not a bool")
    return value


def duration_ms(value: Duration) -> Optional[int]:
    """The duration in ms when it can be known here without the module (``None`` otherwise)."""
    if isinstance(value, timedelta):
        return value // timedelta(milliseconds=1)
    if isinstance(value, int):
        return value
    text = value.strip().lower()
    for unit, factor in (("ms", 1), ("s", 1000), ("m", 60_000), ("h", 3_600_000), ("d", 86_400_000)):
        if text.endswith(unit) and text[: -len(unit)].isdigit():
            return int(text[: -len(unit)]) * factor
    return int(text) if text.isdigit() else None


def flag(value: object, name: str) -> bool:
    """A yes/no option: ``True`` or ``False`` only. ``"yes"``, ``1`` or ``"false"`` are a
    ``TypeError``, never a truthy guess (``shadow="no"`` must not turn a live policy into a
    shadow one)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return value


def _bucket_window_ms(capacity: int, rate: int, period: Duration) -> Optional[int]:
    """The time a full bucket of ``capacity`` takes to refill (drain) at ``rate`` per
    ``period``, in ms, rounded up: the ``w`` of a bucket's ``RateLimit-Policy``."""
    period_ms = duration_ms(period)
    if period_ms is None or not isinstance(rate, int) or rate <= 0 or not isinstance(capacity, int):
        return None
    return -(-capacity * period_ms // rate)


def _cost(cost: int) -> List[Arg]:
    return [] if cost == 1 else ["COST", cost]


@dataclass(frozen=True)
class Token:
    """Token bucket (``RL.TOKEN``): ``capacity`` tokens, refilled with ``rate`` tokens every
    ``period`` — smoothly, or all at once at each period boundary with ``step``."""

    capacity: int
    rate: int
    period: Duration
    step: bool = False

    def __post_init__(self) -> None:
        flag(self.step, "step")

    def command(self) -> str:
        return "RL.TOKEN"

    def params(self, cost: int = 1) -> List[Arg]:
        args: List[Arg] = [self.capacity, self.rate, duration_arg(self.period), *_cost(cost)]
        return args + (["STEP"] if self.step else [])

    def window_ms(self) -> Optional[int]:
        """The time a full bucket takes to refill: ``capacity × period / rate``."""
        return _bucket_window_ms(self.capacity, self.rate, self.period)


@dataclass(frozen=True)
class Period:
    """Fixed window (``RL.PERIOD``): at most ``limit`` per ``period``. Windows start at the first
    admitted request, or with ``align`` at calendar boundaries (``True`` = UTC, or a UTC offset
    duration such as ``"8h"`` / ``"-5h"``)."""

    limit: int
    period: Duration
    align: Union[bool, Duration] = False

    def command(self) -> str:
        return "RL.PERIOD"

    def params(self, cost: int = 1) -> List[Arg]:
        args: List[Arg] = [self.limit, duration_arg(self.period), *_cost(cost)]
        if self.align is True:
            args.append("ALIGN")
        elif self.align is not False:
            args += ["ALIGN", duration_arg(self.align)]
        return args

    def window_ms(self) -> Optional[int]:
        return duration_ms(self.period)


@dataclass(frozen=True)
class Slide:
    """Sliding window (``RL.SLIDE``): at most ``limit`` in any ``window``; an exact log, or
    ``buckets`` counters of ``window / buckets`` each (for large limits)."""

    limit: int
    window: Duration
    buckets: Optional[int] = None

    def command(self) -> str:
        return "RL.SLIDE"

    def params(self, cost: int = 1) -> List[Arg]:
        args: List[Arg] = [self.limit, duration_arg(self.window), *_cost(cost)]
        return args + ([] if self.buckets is None else ["BUCKETS", self.buckets])

    def window_ms(self) -> Optional[int]:
        return duration_ms(self.window)


@dataclass(frozen=True)
class Leaky:
    """Leaky bucket (``RL.LEAKY``) of ``capacity`` draining ``rate`` per ``period``: a queue that
    tells each admitted request how long to wait (``delay`` units ahead tolerated without
    waiting), or with ``nodelay`` a meter."""

    capacity: int
    rate: int
    period: Duration
    nodelay: bool = False
    delay: Optional[int] = None

    def __post_init__(self) -> None:
        flag(self.nodelay, "nodelay")

    def command(self) -> str:
        return "RL.LEAKY"

    def params(self, cost: int = 1) -> List[Arg]:
        args: List[Arg] = [self.capacity, self.rate, duration_arg(self.period), *_cost(cost)]
        if self.nodelay:
            args.append("NODELAY")
        if self.delay is not None:
            args += ["DELAY", self.delay]
        return args

    def window_ms(self) -> Optional[int]:
        """The time a full bucket takes to drain: ``capacity × period / rate``."""
        return _bucket_window_ms(self.capacity, self.rate, self.period)


#: Any limit that ``RL.ALL`` can combine.
Limit = Union[Token, Period, Slide, Leaky]


@dataclass(frozen=True)
class Throttle:
    """GCRA (``CL.THROTTLE``, redis-cell's arguments): ``count`` per ``period_s`` whole seconds,
    up to ``max_burst`` more at once — so one call takes at most ``max_burst + 1`` (its
    ``limit``). :meth:`RateLimit.throttle` takes the same arguments; :class:`PermitBlock` takes
    this spec. Not a :data:`Limit`: ``RL.ALL`` and server policies do not combine GCRA."""

    max_burst: int
    count: int
    period_s: int

    def command(self) -> str:
        return "CL.THROTTLE"

    def params(self, quantity: int = 1) -> List[Arg]:
        return [self.max_burst, self.count, self.period_s, quantity]

    def window_ms(self) -> Optional[int]:
        return None

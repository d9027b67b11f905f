"""The module's commands as argument lists, and their replies as typed values.

Pure functions shared by the sync and asyncio clients (and the ``limits`` storages): each
client method builds one command here, sends it in one round trip, and parses the reply here.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from redis.exceptions import ResponseError

from .decision import AllDecision, Decision, LeaseDecision
from .specs import Arg, Duration, Leaky, Limit, Period, Slide, Throttle, Token, duration_arg, duration_ms, flag

#: A value of ``RL.INFO``: an integer, a text (``algorithm``), or a list (``leases``,
#: ``window_counts``).
InfoValue = Union[int, str, bytes, List[Any]]


class ModuleNotLoadedError(ResponseError):
    """The server does not know the module's commands: the module is not loaded there."""


_HOW_TO_LOAD = (
    "the redis-ratelimit module is not loaded on this server: start it with "
    "`redis-server --loadmodule /path/to/libredis_ratelimit.so` (or `loadmodule` in "
    "redis.conf), or run `MODULE LOAD /path/to/libredis_ratelimit.so`"
)


def module_missing(error: Exception, command: str) -> Optional[ModuleNotLoadedError]:
    """The clear error to raise instead of ``error`` when it says the command is unknown."""
    text = str(error)
    if "unknown command" in text.lower() and command.lower() in text.lower():
        return ModuleNotLoadedError(f"{_HOW_TO_LOAD} (server said: {text})")
    return None


def options(
    ban: Optional[Duration] = None,
    wait: Optional[Duration] = None,
    dryrun: bool = False,
    at: Optional[int] = None,
    deadline: Optional[int] = None,
) -> List[Arg]:
    """The options after a limiting command's parameters (``COST`` comes with the parameters).
    ``deadline``: unix ms (this machine's clock) after which the server counts nothing and
    answers a ``DEADLINE`` error (the caller has given up)."""
    args: List[Arg] = []
    if ban is not None:
        args += ["BAN", duration_arg(ban)]
    if wait is not None:
        args += ["WAIT", duration_arg(wait)]
    if flag(dryrun, "dryrun"):
        args.append("DRYRUN")
    if at is not None:
        args += ["AT", at]
    if deadline is not None:
        args += ["DEADLINE", deadline]
    return args


def limiting(
    key: Union[str, bytes],
    spec: Limit,
    cost: int = 1,
    ban: Optional[Duration] = None,
    wait: Optional[Duration] = None,
    dryrun: bool = False,
    at: Optional[int] = None,
    deadline: Optional[int] = None,
) -> List[Arg]:
    """``RL.TOKEN`` / ``RL.PERIOD`` / ``RL.SLIDE`` / ``RL.LEAKY`` for ``spec`` on ``key``."""
    return [spec.command(), key, *spec.params(cost), *options(ban, wait, dryrun, at, deadline)]


_KEYWORDS = ((Token, "TOKEN"), (Period, "PERIOD"), (Slide, "SLIDE"), (Leaky, "LEAKY"))

#: The limits of ``RL.ALL``: a mapping key → limit, or ``(key, limit)`` pairs (a list or a
#: tuple of them; one pair alone too).
AllLimits = Union[
    Mapping[Union[str, bytes], Limit],
    Sequence[Tuple[Union[str, bytes], Limit]],
    Tuple[Union[str, bytes], Limit],
]


def _keyword(spec: object) -> str:
    for cls, word in _KEYWORDS:
        if isinstance(spec, cls):
            return word
    raise TypeError(f"RL.ALL takes Token, Period, Slide or Leaky limits, got {type(spec).__name__}: {spec!r}")


def _pairs(limits: AllLimits) -> List[Tuple[Union[str, bytes], Limit]]:
    if isinstance(limits, Mapping):
        return list(limits.items())
    items: Iterable[Any] = limits
    if isinstance(limits, tuple) and len(limits) == 2 and isinstance(limits[0], (str, bytes)):
        items = [limits]  # one (key, limit) pair
    pairs = []
    for item in items:
        if not (isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[0], (str, bytes))):
            raise TypeError(f"RL.ALL takes (key, limit) pairs or a mapping key → limit, got {item!r}")
        pairs.append((item[0], item[1]))
    return pairs


def all_of(
    limits: AllLimits,
    costs: Optional[Sequence[int]] = None,
    dryrun: bool = False,
    at: Optional[int] = None,
) -> List[Arg]:
    """``RL.ALL``: one limit per key, in order; ``costs`` (default 1 each) per limit."""
    pairs = _pairs(limits)
    if not pairs:
        raise ValueError("RL.ALL needs at least one (key, limit) pair")
    if costs is not None and len(costs) != len(pairs):
        raise ValueError(f"{len(pairs)} limits but {len(costs)} costs")
    args: List[Arg] = ["RL.ALL", len(pairs), *(key for key, _ in pairs)]
    for i, (_, spec) in enumerate(pairs):
        args += [_keyword(spec), *spec.params(1 if costs is None else costs[i])]
    if flag(dryrun, "dryrun"):
        args.append("DRYRUN")
    if at is not None:
        args += ["AT", at]
    return args


def socket_timeout(client: Any) -> Optional[float]:
    """The socket timeout (s) of a redis-py client, standalone or cluster, sync or asyncio;
    ``None`` when it has none (or it cannot be told)."""
    for owner in (getattr(client, "connection_pool", None), getattr(client, "nodes_manager", None), client):
        kwargs = getattr(owner, "connection_kwargs", None)
        if isinstance(kwargs, dict):
            timeout = kwargs.get("socket_timeout")
            return None if timeout is None else float(timeout)
    return None


def check_wait(client: Any, wait: Optional[Duration]) -> None:
    """Refuses a ``wait`` the client's socket timeout would cut short: redis-py would give up
    reading, then retry (each retry waiting again), for far longer than the wait."""
    if wait is None or getattr(client, "_send_once", None) is not None:
        return  # a client that reads a waiting call's answer with a timeout covering it
    wait_ms = duration_ms(wait)
    timeout = socket_timeout(client)
    if wait_ms is None or timeout is None:
        return
    if wait_ms + WAIT_MARGIN_MS > timeout * 1000:
        raise ValueError(
            f"wait={wait_ms}ms needs a client whose socket_timeout exceeds it (by {WAIT_MARGIN_MS} ms at "
            f"least), this one's is {timeout:g} s: use a shorter wait, or a client with a longer "
            "socket_timeout (or none) for waiting calls"
        )


#: How much longer than a ``WAIT`` the socket timeout must be (the answer's round trip).
WAIT_MARGIN_MS = 100


def throttle(
    key: Union[str, bytes],
    max_burst: int,
    count: int,
    period_s: int,
    quantity: int = 1,
    dryrun: bool = False,
    at: Optional[int] = None,
) -> List[Arg]:
    """``CL.THROTTLE`` (redis-cell compatible GCRA; ``period_s`` in whole seconds)."""
    spec = Throttle(max_burst, count, period_s)
    return [spec.command(), key, *spec.params(quantity), *options(None, None, dryrun, at)]


def acquire(
    key: Union[str, bytes],
    limit: int,
    lease: Duration,
    id: Optional[Union[str, bytes]] = None,
    wait: Optional[Duration] = None,
    dryrun: bool = False,
    at: Optional[int] = None,
) -> List[Arg]:
    """``RL.ACQUIRE``: a lease among at most ``limit`` held at once, lapsing after ``lease``."""
    args: List[Arg] = ["RL.ACQUIRE", key, limit, duration_arg(lease)]
    if id is not None:
        args += ["ID", id]
    return args + options(None, wait, dryrun, at)


def with_at(args: List[Arg], at: Optional[int]) -> List[Arg]:
    return args if at is None else [*args, "AT", at]


def decision(reply: Any) -> Decision:
    """The 5-integer reply of a limiting command."""
    allowed, limit, remaining, retry_after_ms, reset_after_ms = reply[:5]
    return Decision(bool(allowed), int(limit), int(remaining), int(retry_after_ms), int(reset_after_ms))


def optional_decision(reply: Any) -> Optional[Decision]:
    """``RL.PEEK`` / ``RL.REFUND``: nil when the key holds no limiter."""
    return None if reply is None else decision(reply)


def lease_decision(reply: Any) -> LeaseDecision:
    """The 6-element reply of ``RL.ACQUIRE``: the decision and the lease id (nil if none)."""
    d = decision(reply)
    lease_id = reply[5]
    return LeaseDecision(d.allowed, d.limit, d.remaining, d.retry_after_ms, d.reset_after_ms, lease_id)


def all_decision(reply: Any) -> AllDecision:
    """The 7-element reply of ``RL.ALL`` (its 1-based index made 0-based)."""
    d = decision(reply)
    details = tuple(decision(r) for r in reply[6])
    return AllDecision(d.allowed, d.limit, d.remaining, d.retry_after_ms, d.reset_after_ms, int(reply[5]) - 1, details)


def throttle_decision(reply: Any) -> Decision:
    """redis-cell's reply ``[limited, limit, remaining, retry_after_s, reset_after_s]`` as a
    :class:`Decision` in ms: ``allowed`` = not limited; seconds × 1000 (redis-cell's whole
    seconds, rounded up); ``retry_after_ms`` 0 when admitted, -1 when it can never be."""
    limited, limit, remaining, retry_s, reset_s = (int(v) for v in reply[:5])
    allowed = limited == 0
    retry_ms = 0 if allowed else (-1 if retry_s < 0 else retry_s * 1000)
    return Decision(allowed, limit, remaining, retry_ms, max(0, reset_s) * 1000)


def _text(value: Any) -> Any:
    if isinstance(value, bytes):
        try:
            return value.decode()
        except UnicodeDecodeError:
            return value
    if isinstance(value, list):
        return [_text(v) for v in value]
    return value


def info(reply: Any) -> Optional[Dict[str, InfoValue]]:
    """``RL.INFO``: field → value (a flat array in RESP2, a map in RESP3); nil → ``None``.
    Field names become ``str``; text values (``algorithm``) too; lease ids stay as sent."""
    if reply is None:
        return None
    pairs = list(reply.items()) if isinstance(reply, dict) else list(zip(reply[::2], reply[1::2]))
    out: Dict[str, InfoValue] = {}
    for name, value in pairs:
        field = name.decode() if isinstance(name, bytes) else str(name)
        out[field] = value if field == "leases" else _text(value)
    return out


# -- policies: limits the server holds (RL.POLICY, RL.HIT) ------------------------------------


def hit(
    name: Union[str, bytes],
    key: Union[str, bytes],
    cost: int = 1,
    wait: Optional[Duration] = None,
    dryrun: bool = False,
    at: Optional[int] = None,
    deadline: Optional[int] = None,
) -> List[Arg]:
    """``RL.HIT name key [COST n] …``: ``key`` judged by the server's policy ``name``."""
    args: List[Arg] = ["RL.HIT", name, key]
    if cost != 1:
        args += ["COST", cost]
    return args + options(None, wait, dryrun, at, deadline)


def policy_set(
    name: Union[str, bytes],
    limit: Limit,
    ban: Optional[Duration] = None,
    clear: bool = False,
    shadow: bool = False,
    for_key: Optional[Union[str, bytes]] = None,
) -> List[Arg]:
    """``RL.POLICY SET name <ALGORITHM params> [BAN d [CLEAR]] [SHADOW] [FOR key]``. The
    yes/no options are checked before anything is sent: a ``SET`` replaces the policy whole."""
    flag(clear, "clear")
    flag(shadow, "shadow")
    if clear and ban is None:
        raise ValueError("clear needs ban (BAN d CLEAR)")
    args: List[Arg] = ["RL.POLICY", "SET", name, _keyword(limit), *limit.params(1)]
    if ban is not None:
        args += ["BAN", duration_arg(ban), *(["CLEAR"] if clear else [])]
    if shadow:
        args.append("SHADOW")
    return args + for_arg(for_key)


def for_arg(for_key: Optional[Union[str, bytes]]) -> List[Arg]:
    return [] if for_key is None else ["FOR", for_key]


def policy_names(replies: Sequence[Any]) -> List[str]:
    """``RL.POLICY LIST`` of every node asked: each name once, sorted."""
    names = {_text(n) if isinstance(n, bytes) else str(n) for reply in replies for n in reply or []}
    return sorted(str(n) for n in names)


def policy_stats(replies: Sequence[Any]) -> Dict[str, int]:
    """``RL.POLICY STATS`` of every node asked, each counter summed."""
    total: Dict[str, int] = {}
    for reply in replies:
        for field, value in (info(reply) or {}).items():
            if isinstance(value, int):
                total[field] = total.get(field, 0) + value
    return total


def deadline_passed(error: BaseException) -> bool:
    """Whether ``error`` is the server's answer to a call it ran past its ``DEADLINE``."""
    return isinstance(error, ResponseError) and str(error).startswith("DEADLINE ")

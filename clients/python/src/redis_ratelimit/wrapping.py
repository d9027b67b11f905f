"""Wrapping a client the application already holds: ``RateLimit(redis_client)``.

Most applications already have a ``redis.Redis`` (or a pool, or a cluster client). The typed
clients take it as their one argument and send every command through it:

- a standalone client (sync or asyncio) or its ``ConnectionPool``: the new client uses the same
  pool (the same connections, options and credentials; closing it leaves the pool open);
- a cluster client: the new client shares its topology and node connections; closing or
  dropping it leaves them to their owner.

Anything else as the first argument is refused at construction, saying which class takes it.
"""

from __future__ import annotations

from typing import Any, Dict, Tuple

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster

#: Where each kind of redis-py client (or pool) goes: the most specific classes first.
_WRAPPER_OF: Tuple[Tuple[type, str], ...] = (
    (redis.asyncio.cluster.RedisCluster, "AsyncRateLimitCluster"),
    (redis.cluster.RedisCluster, "RateLimitCluster"),
    (redis.asyncio.Redis, "AsyncRateLimit"),
    (redis.asyncio.ConnectionPool, "AsyncRateLimit"),
    (redis.Redis, "RateLimit"),
    (redis.ConnectionPool, "RateLimit"),
)

#: The attribute marking a cluster client that borrows another's state (see :func:`borrow`).
BORROWED = "_ratelimit_borrowed"


def wrapper_for(value: object) -> str:
    """The class of this package that wraps ``value`` ("" when none does)."""
    for cls, name in _WRAPPER_OF:
        if isinstance(value, cls):
            return name
    return ""


def refuse(wrapper: str, value: object, accepts: str) -> TypeError:
    """The error for ``wrapper(value)`` when ``value`` is not what it wraps."""
    fits = wrapper_for(value)
    hint = f"; wrap it with {fits}(client)" if fits else ""
    return TypeError(
        f"{wrapper}() takes {accepts} to wrap, or connection options (host=..., port=...; or "
        f"{wrapper}.from_url(url)); got {type(value).__module__}.{type(value).__qualname__}{hint}"
    )


def no_options_with(wrapper: str, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> None:
    """A wrapped client brings its own options: more arguments would silently do nothing."""
    if len(args) > 1 or kwargs:
        raise TypeError(
            f"{wrapper}(client) takes no other arguments: the wrapped client's options apply "
            "(configure that client instead)"
        )


def is_pool(value: object, asyncio: bool) -> bool:
    """``value`` is a standalone client or pool of the right flavour (sync or asyncio)."""
    if asyncio:
        return isinstance(value, (redis.asyncio.Redis, redis.asyncio.ConnectionPool))
    return isinstance(value, (redis.Redis, redis.ConnectionPool))


def pool_of(value: Any) -> Any:
    """The connection pool of a standalone client, or the pool itself."""
    return value.connection_pool if isinstance(value, (redis.Redis, redis.asyncio.Redis)) else value


def borrow(target: object, source: object) -> None:
    """Makes the cluster client ``target`` send through ``source``'s topology and connections
    (its attributes, shared; redis-py's asyncio cluster keeps them in ``__slots__``), marked
    so that closing ``target`` leaves them open."""
    for cls in type(source).__mro__:
        slots = vars(cls).get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name not in ("__dict__", "__weakref__") and hasattr(source, name):
                setattr(target, name, getattr(source, name))
    vars(target).update(getattr(source, "__dict__", {}))
    setattr(target, BORROWED, True)


def borrowed(client: object) -> bool:
    return bool(getattr(client, "__dict__", {}).get(BORROWED, False))

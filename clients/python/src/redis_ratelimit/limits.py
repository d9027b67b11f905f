"""Storages for the ``limits`` library (the engine of Flask-Limiter and SlowAPI) backed by the
module: one native command per decision, no Lua, no read-modify-write.

Importing this module registers the URI schemes (``limits.storage.storage_from_string``); call
:func:`register` where the application sets up its limiter so that the import is used (linters
such as ``ruff --fix`` remove an import that is only there for its side effect):

============================  ==========================  =====================================
scheme                        class                       connection
============================  ==========================  =====================================
``ratelimit://h:p[/db]``      :class:`ModuleStorage`      ``redis://`` (``ratelimits://``: TLS)
``ratelimit+unix:///sock``    :class:`ModuleStorage`      ``unix://``
``ratelimit+cluster://h:p,…`` :class:`ModuleClusterStorage`  Redis Cluster
``ratelimit+sentinel://h:p/s`` :class:`ModuleSentinelStorage` Sentinel
``async+ratelimit…``          :class:`AsyncModuleStorage` / :class:`AsyncModuleClusterStorage`
============================  ==========================  =====================================

The classes subclass limits' own ``RedisStorage`` (sync resp. asyncio) and keep its connection
handling, options (``key_prefix``, ``wrap_exceptions``, connection options; asyncio:
``implementation="redispy"`` (the default here: redis-py is this package's one dependency) or
``"coredis"``) and key names; they also accept the stock ``redis://``
URIs. Each strategy maps to one command per call (see the package README, "limits storage"):

- fixed window: an ``RL.PERIOD`` counter that counts past the item's limit (its own ceiling is
  2^32 - 1; the count is ``ceiling - remaining``), window fixed at the first hit, key expiring
  at the window's end;
- moving window: the exact ``RL.SLIDE`` log (same-ms hits merged, ≤ 16 bytes per distinct ms):
  a 100 000/day window costs per hit what a 10/day one costs;
- sliding window counter: ``RL.SLIDE … BUCKETS 1 ANCHOR FLOOR``, limits' weighted two-window
  counter exactly (windows anchored at the first hit, ``floor(prev × prev_ttl / P) + cur``);
- reads (``get``, ``get_moving_window``, ``get_sliding_window``): ``RL.PEEK`` / ``RL.INFO``;
- a limit of 0 (``0 per minute``) admits nothing, as stock, without a command.

Every instant comes from the server clock (one clock for all clients; see the README for why).

Keys live beside limits' stock ones, never on them: ``key_prefix`` (default ``LIMITS``) becomes
``<key_prefix>:rl``, so a key is ``LIMITS:rl:<key>`` where stock ``RedisStorage`` writes
``LIMITS:<key>``. A service switched from the stock storage on a live Redis (or stock instances
still running beside it) never meets ``WRONGTYPE``. When a fixed window starts, the count the
stock storage left at ``LIMITS:<key>`` is read once and carried over (``GET``, ``RL.CHARGE``);
moving and sliding windows start fresh at the switch.
"""

from __future__ import annotations

import time
from typing import Any, Dict, List, Optional, Tuple, cast

import limits.aio.storage
import limits.storage
from redis.exceptions import ResponseError

from . import commands as cmd
from .specs import Arg

#: The ceiling of the counter behind the fixed window. ``limits`` counts past its own limit
#: (``incr`` returns the new count), so the counter is an ``RL.PERIOD`` whose limit no real
#: window reaches: 2^32 - 1 keeps the module's compact 48-byte form (10^12 would need the
#: 80-byte one). A window counted past it stops there (``incr`` then answers the ceiling), which
#: changes no decision for any limit below it.
COUNTER_LIMIT = 4_294_967_295

_SCHEME_MAP = (
    ("async+ratelimit+sentinel", "async+redis+sentinel"),
    ("async+ratelimit+cluster", "async+redis+cluster"),
    ("async+ratelimit+unix", "async+redis+unix"),
    ("async+ratelimits", "async+rediss"),
    ("async+ratelimit", "async+redis"),
    ("ratelimit+sentinel", "redis+sentinel"),
    ("ratelimit+cluster", "redis+cluster"),
    ("ratelimit+unix", "redis+unix"),
    ("ratelimits", "rediss"),
    ("ratelimit", "redis"),
)


def redis_uri(uri: str) -> str:
    """The redis-py URI for a ``ratelimit…://`` one (others are returned unchanged)."""
    for ours, theirs in _SCHEME_MAP:
        if uri.startswith(ours + "://"):
            return theirs + uri[len(ours) :]
    return uri


# -- the commands and what their replies mean for limits (shared by sync and asyncio) --------


#: What marks this package's keys beside limits' stock ones: ``<key_prefix>:rl:<key>``.
KEY_MARK = "rl"


def _beside_stock(options: Dict[str, Any]) -> str:
    """Moves ``key_prefix`` (limits' option, default ``LIMITS``) to ``<key_prefix>:rl`` in
    ``options`` and returns the stock prefix, whose keys hold the stock storage's counts."""
    stock = str(options.get("key_prefix", limits.storage.RedisStorage.PREFIX))
    options["key_prefix"] = f"{stock}:{KEY_MARK}"
    return stock


def _stock_count(reply: Any) -> int:
    """The stock fixed-window count from ``GET`` of its key (0 when missing or not a count)."""
    try:
        return max(0, int(reply)) if reply is not None else 0
    except (TypeError, ValueError):
        return 0


def _require(info: Dict[str, cmd.InfoValue], field: str) -> None:
    if field not in info:
        raise RuntimeError(
            f"RL.INFO has no {field}: the server's redis-ratelimit module predates what this storage needs "
            "(RL.INFO window fields and RL.SLIDE … ANCHOR FLOOR); load a newer build of the module"
        )


def _incr_args(key: str, expiry: int, amount: int) -> List[Arg]:
    return ["RL.PERIOD", key, COUNTER_LIMIT, expiry * 1000, "COST", amount]


def _count_from_peek(reply: Any) -> int:
    """Permits counted now, from ``RL.PEEK`` (a dry run of cost 1): ``limit - remaining``,
    less the one the dry run itself took when admitted; 0 for a missing key."""
    if reply is None:
        return 0
    d = cmd.decision(reply)
    return d.limit - d.remaining - (1 if d.allowed else 0)


def _moving_args(key: str, limit: int, expiry: int, amount: int) -> List[Arg]:
    return ["RL.SLIDE", key, limit, expiry * 1000, "COST", amount]


def _moving_window(reply: Any) -> Tuple[float, int]:
    """(oldest hit still in the window, in epoch seconds; permits in the window) from
    ``RL.INFO`` of an exact ``RL.SLIDE`` log; ``(now, 0)`` when empty."""
    info = cmd.info(reply)
    if not info:
        return time.time(), 0
    _require(info, "window_used")
    used = int(cast(int, info.get("window_used", 0)))
    oldest = int(cast(int, info.get("window_oldest_ms", -1)))
    if used <= 0 or oldest < 0:
        return int(cast(int, info.get("now_ms", time.time() * 1000))) / 1000, 0
    return oldest / 1000, used


def _sliding_args(key: str, limit: int, expiry: int, amount: int) -> List[Arg]:
    return ["RL.SLIDE", key, limit, expiry * 1000, "BUCKETS", 1, "ANCHOR", "FLOOR", "COST", amount]


def _sliding_window(reply: Any, expiry: int) -> Tuple[int, float, int, float]:
    """limits' ``(previous count, previous ttl s, current count, current ttl s)`` from
    ``RL.INFO`` of a ``BUCKETS 1 ANCHOR FLOOR`` window: the counters at the server's ``now``
    and the times until each would expire in limits' two-key layout (previous: ``start + 2P``,
    current: ``start + 3P``, ``start`` being the previous sub-window's start), 0 for an empty
    counter."""
    info = cmd.info(reply)
    if not info:
        return 0, 0.0, 0, 0.0
    _require(info, "window_counts")
    counts = cast(List[Any], info["window_counts"])
    previous, current = int(counts[-2]), int(counts[-1])
    period = int(cast(int, info.get("window_ms", expiry * 1000)))
    start = int(cast(int, info["window_start_ms"]))
    now = int(cast(int, info["now_ms"]))
    # The server's clock has whole ms: at now_ms the true time left lies in (ttl - 1, ttl] ms.
    # Report the middle of that ms, as limits' Redis TTLs are read a fraction of a ms after
    # they were set; it also keeps limits' `ttl % period` off its boundary (a TTL of exactly
    # 2 periods read in the very ms of the first hit would say "resets now").
    previous_ttl = max(0.0, start + 2 * period - now - 0.5) / 1000 if previous else 0.0
    current_ttl = max(0.0, start + 3 * period - now - 0.5) / 1000 if current else 0.0
    return previous, previous_ttl, current, current_ttl


# -- sync ------------------------------------------------------------------------------------


class _ModuleStorageMethods:
    """The module-backed methods, over limits' sync ``RedisStorage`` connection handling."""

    key_prefix: str

    def _connection(self) -> Any:
        return cast(Any, self).get_connection()

    def _send(self, *args: Arg) -> Any:
        try:
            return self._connection().execute_command(*args)
        except ResponseError as error:
            missing = cmd.module_missing(error, str(args[0]))
            if missing is not None:
                raise missing from error
            raise

    def _key(self, key: str) -> str:
        return f"{self.key_prefix}:{key}"

    def _window_key(self, key: str) -> str:
        """The sliding-window counter's key: limits' current-window name ``<prefix>:{key}``
        (one key holds both counters)."""
        return self._key(f"{{{key}}}")

    def initialize_storage(self, _uri: str) -> None:
        """No scripts: every call is one module command."""

    _stock_prefix: str

    def incr(self, key: str, expiry: int, amount: int = 1) -> int:
        count = COUNTER_LIMIT - cmd.decision(self._send(*_incr_args(self._key(key), expiry, amount))).remaining
        if count == amount and amount > 0:
            count += self._carry_over(key)
        return count

    def _carry_over(self, key: str) -> int:
        """A fixed window just started: what the stock storage counted at its own key, charged
        onto this one once (0 when nothing)."""
        try:
            stock = _stock_count(self._connection().get(f"{self._stock_prefix}:{key}"))
        except ResponseError:  # a key of another type is not a stock count
            return 0
        if stock:
            self._send("RL.CHARGE", self._key(key), stock)
        return stock

    def get(self, key: str) -> int:
        return _count_from_peek(self._send("RL.PEEK", self._key(key)))

    def acquire_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        if limit <= 0:
            return False
        return cmd.decision(self._send(*_moving_args(self._key(key), limit, expiry, amount))).allowed

    def get_moving_window(self, key: str, limit: int, expiry: int) -> Tuple[float, int]:
        return _moving_window(self._send("RL.INFO", self._key(key)))

    def acquire_sliding_window_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        if limit <= 0:
            return False
        return cmd.decision(self._send(*_sliding_args(self._window_key(key), limit, expiry, amount))).allowed

    def get_sliding_window(self, key: str, expiry: int) -> Tuple[int, float, int, float]:
        return _sliding_window(self._send("RL.INFO", self._window_key(key)), expiry)

    def clear_sliding_window(self, key: str, expiry: int) -> None:
        self._connection().delete(self._window_key(key))

    def reset(self) -> Optional[int]:
        """Deletes every key under the prefix (``SCAN`` + ``DEL`` in batches; no Lua) and
        returns how many were deleted."""
        connection = self._connection()
        deleted, batch = 0, []
        for key in connection.scan_iter(match=self._key("*"), count=1000):
            batch.append(key)
            if len(batch) >= 1000:
                deleted += int(connection.delete(*batch))
                batch = []
        if batch:
            deleted += int(connection.delete(*batch))
        return deleted


class ModuleStorage(_ModuleStorageMethods, limits.storage.RedisStorage):
    """limits storage on a Redis (or Valkey) server with the module loaded:
    ``ratelimit://host:port[/db]``, ``ratelimits://`` (TLS), ``ratelimit+unix:///path.sock``.
    Constructor arguments as limits' ``RedisStorage``."""

    STORAGE_SCHEME = ["ratelimit", "ratelimits", "ratelimit+unix"]

    def __init__(self, uri: str, *args: Any, **options: Any) -> None:
        self._stock_prefix = _beside_stock(options)
        super().__init__(redis_uri(uri), *args, **options)


class ModuleClusterStorage(_ModuleStorageMethods, limits.storage.RedisClusterStorage):
    """limits storage on a Redis Cluster whose nodes load the module:
    ``ratelimit+cluster://host:port,host:port``."""

    STORAGE_SCHEME = ["ratelimit+cluster"]

    def __init__(self, uri: str, *args: Any, **options: Any) -> None:
        self._stock_prefix = _beside_stock(options)
        super().__init__(redis_uri(uri), *args, **options)


class ModuleSentinelStorage(_ModuleStorageMethods, limits.storage.RedisSentinelStorage):
    """limits storage on a Sentinel-managed master that loads the module:
    ``ratelimit+sentinel://host:port,host:port/service_name``. Every command goes to the master
    (limits' ``get_expiry`` may read ``TTL`` from a replica with ``use_replicas``, as stock)."""

    STORAGE_SCHEME = ["ratelimit+sentinel"]

    def __init__(self, uri: str, *args: Any, **options: Any) -> None:
        self._stock_prefix = _beside_stock(options)
        super().__init__(redis_uri(uri), *args, **options)


# -- asyncio ---------------------------------------------------------------------------------


def _no_scripts() -> None:
    """Replaces the bridge's script registration: no Lua."""


class _AsyncModuleStorageMethods:
    """The module-backed methods over limits' asyncio bridge (redis-py by default, or coredis)."""

    bridge: Any

    _stock_prefix: str

    def __init__(self, uri: str, *args: Any, **options: Any) -> None:
        options.setdefault("implementation", "redispy")
        self._stock_prefix = _beside_stock(options)
        cast(Any, super()).__init__(redis_uri(uri), *args, **options)

    def configure_bridge(self) -> None:
        cast(Any, super()).configure_bridge()
        self.bridge.register_scripts = _no_scripts

    def _connection(self) -> Any:
        return self.bridge.get_connection()

    def _coredis(self) -> bool:
        return type(self.bridge).__name__ == "CoredisBridge"

    async def _send(self, *args: Arg) -> Any:
        try:
            if self._coredis():
                from coredis.typing import RedisCommand

                name = str(args[0]).encode()
                return await self._connection().execute_command(RedisCommand(name, tuple(args[1:])))
            return await self._connection().execute_command(*args)
        except Exception as error:  # coredis and redis-py raise their own error classes
            missing = cmd.module_missing(error, str(args[0]))
            if missing is not None:
                raise missing from error
            raise

    def _key(self, key: str) -> str:
        return cast(str, self.bridge.prefixed_key(key))

    def _window_key(self, key: str) -> str:
        return self._key(f"{{{key}}}")

    async def incr(self, key: str, expiry: int, amount: int = 1) -> int:
        reply = await self._send(*_incr_args(self._key(key), expiry, amount))
        count = COUNTER_LIMIT - cmd.decision(reply).remaining
        if count == amount and amount > 0:
            count += await self._carry_over(key)
        return count

    async def _carry_over(self, key: str) -> int:
        """As the sync storage's: the stock count charged onto a window that just started."""
        try:
            stock = _stock_count(await self._send("GET", f"{self._stock_prefix}:{key}"))
        except Exception as error:  # coredis and redis-py raise their own error classes
            if "WRONGTYPE" in str(error):
                return 0
            raise
        if stock:
            await self._send("RL.CHARGE", self._key(key), stock)
        return stock

    async def get(self, key: str) -> int:
        return _count_from_peek(await self._send("RL.PEEK", self._key(key)))

    async def acquire_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        if limit <= 0:
            return False
        return cmd.decision(await self._send(*_moving_args(self._key(key), limit, expiry, amount))).allowed

    async def get_moving_window(self, key: str, limit: int, expiry: int) -> Tuple[float, int]:
        return _moving_window(await self._send("RL.INFO", self._key(key)))

    async def acquire_sliding_window_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        if limit <= 0:
            return False
        reply = await self._send(*_sliding_args(self._window_key(key), limit, expiry, amount))
        return cmd.decision(reply).allowed

    async def get_sliding_window(self, key: str, expiry: int) -> Tuple[int, float, int, float]:
        return _sliding_window(await self._send("RL.INFO", self._window_key(key)), expiry)

    async def clear_sliding_window(self, key: str, expiry: int) -> None:
        await self._delete([self._window_key(key)])

    async def _delete(self, keys: List[Any]) -> int:
        if self._coredis():
            return int(await self._connection().delete(keys))
        return int(await self._connection().delete(*keys))

    async def reset(self) -> Optional[int]:
        """Deletes every key under the prefix (``SCAN`` + ``DEL`` in batches; no Lua) and
        returns how many were deleted."""
        deleted, batch = 0, []
        async for key in self._connection().scan_iter(match=self._key("*"), count=1000):
            batch.append(key)
            if len(batch) >= 1000:
                deleted += await self._delete(batch)
                batch = []
        if batch:
            deleted += await self._delete(batch)
        return deleted


class AsyncModuleStorage(_AsyncModuleStorageMethods, limits.aio.storage.RedisStorage):
    """asyncio limits storage on a server with the module loaded: ``async+ratelimit://host:port``,
    ``async+ratelimits://``, ``async+ratelimit+unix:///path.sock``. Constructor arguments as
    limits' asyncio ``RedisStorage``, except that ``implementation`` defaults to ``"redispy"``
    (limits' own default, ``"coredis"``, needs coredis installed)."""

    STORAGE_SCHEME = ["async+ratelimit", "async+ratelimits", "async+ratelimit+unix"]


class AsyncModuleClusterStorage(_AsyncModuleStorageMethods, limits.aio.storage.RedisClusterStorage):
    """asyncio limits storage on a Redis Cluster: ``async+ratelimit+cluster://host:port,…``."""

    STORAGE_SCHEME = ["async+ratelimit+cluster"]


class AsyncModuleSentinelStorage(_AsyncModuleStorageMethods, limits.aio.storage.RedisSentinelStorage):
    """asyncio limits storage behind Sentinel: ``async+ratelimit+sentinel://host:port/service``."""

    STORAGE_SCHEME = ["async+ratelimit+sentinel"]


#: The storage classes of this module, each registered with limits for its schemes.
STORAGES = (
    ModuleStorage,
    ModuleClusterStorage,
    ModuleSentinelStorage,
    AsyncModuleStorage,
    AsyncModuleClusterStorage,
    AsyncModuleSentinelStorage,
)


def register() -> List[str]:
    """Makes sure limits knows the ``ratelimit…://`` schemes (defining the classes registered
    them, so this only checks) and returns them. Call it where the limiter is set up::

        from redis_ratelimit.limits import register
        register()
        limiter = Limiter(get_remote_address, app=app, storage_uri="ratelimit://localhost:6379")

    — a use of the import that linters keep (a bare ``import redis_ratelimit.limits`` for its
    side effect is what ``ruff --fix`` removes)."""
    registry = cast(Dict[str, Any], getattr(limits.storage, "SCHEMES", {}))  # filled by limits' metaclass
    schemes = []
    for storage in STORAGES:
        for scheme in storage.STORAGE_SCHEME or []:
            registry.setdefault(scheme, storage)
            schemes.append(scheme)
    return schemes

"""The typed asyncio clients: :class:`AsyncRateLimit` (a ``redis.asyncio.Redis``) and
:class:`AsyncRateLimitCluster` (a ``redis.asyncio.cluster.RedisCluster``). The same methods as
the sync clients (:mod:`redis_ratelimit.client`), as coroutines; one command each.

Wrap the client the application already has: ``AsyncRateLimit(redis_asyncio_client)`` (or its
``ConnectionPool``), ``AsyncRateLimitCluster(cluster_client)`` — same connections, same options.
"""

from __future__ import annotations

import asyncio
import math
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Type, TypeVar, Union, cast, overload

import redis
import redis.asyncio
import redis.asyncio.cluster
from redis.exceptions import AskError, ClusterError, MovedError, ResponseError, TryAgainError

from . import commands as cmd
from . import wrapping
from .client import COUNTING, _wait_s
from .decision import AllDecision, Decision, LeaseDecision
from .specs import Arg, Duration, Leaky, Limit, Period, Slide, Token

Key = Union[str, bytes]
_Client = TypeVar("_Client", bound="AsyncRateLimit")
_Cluster = TypeVar("_Cluster", bound="AsyncRateLimitCluster")


class AsyncRateLimitCommands:
    """The module's commands for a redis-py asyncio client (a mixin over ``execute_command``)."""

    async def _send(self, *args: Arg, **options: Any) -> Any:
        try:
            if str(args[0]).upper() in COUNTING and isinstance(self, (AsyncSendsOnce, AsyncClusterSendsOnce)):
                return await self._send_once(*args)
            return await cast(Any, self).execute_command(*args, **options)
        except ResponseError as error:
            missing = cmd.module_missing(error, str(args[0]))
            if missing is not None:
                raise missing from error
            raise

    async def _send_to_primaries(self, *args: Arg) -> List[Any]:
        """One reply per node: every primary of a cluster client (each holds its own policy
        table), or the one server."""
        if isinstance(self, redis.asyncio.cluster.RedisCluster):
            await cast(Any, self).initialize()  # discovers the nodes on first use
            return [await self._send(*args, target_nodes=node) for node in cast(Any, self).get_primaries()]
        return [await self._send(*args)]

    # -- begin commands: generated from client.py's RateLimitCommands by gen_aio.py (make the
    # change there and run `python gen_aio.py`); tests/test_async_generated.py checks it --

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
        deadline: Optional[int] = None,
    ) -> Decision:
        """One request of ``cost`` against ``limit`` (a :class:`Token`, :class:`Period`,
        :class:`Slide` or :class:`Leaky`) on ``key``. ``ban``: refused requests start a ban of
        that long; ``wait``: block in the server until admitted, at most that long (the
        answer is read with a timeout covering it); ``dryrun``: change nothing; ``at``: unix ms to
        judge at instead of the server clock; ``deadline``: unix ms (this machine's clock)
        after which the call counts nothing (a ``ResponseError`` starting ``DEADLINE``)."""
        cmd.check_wait(self, wait)
        return cmd.decision(await self._send(*cmd.limiting(key, limit, cost, ban, wait, dryrun, at, deadline)))

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
        deadline: Optional[int] = None,
    ) -> Decision:
        """``RL.TOKEN``: token bucket of ``capacity``, ``rate`` tokens per ``period``."""
        return await self.apply(
            key,
            Token(capacity, rate, period, step),
            cost=cost,
            ban=ban,
            wait=wait,
            dryrun=dryrun,
            at=at,
            deadline=deadline,
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
        deadline: Optional[int] = None,
    ) -> Decision:
        """``RL.PERIOD``: fixed window of ``limit`` per ``period`` (``align``: calendar windows)."""
        return await self.apply(
            key, Period(limit, period, align), cost=cost, ban=ban, wait=wait, dryrun=dryrun, at=at, deadline=deadline
        )

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
        deadline: Optional[int] = None,
    ) -> Decision:
        """``RL.SLIDE``: at most ``limit`` in any ``window`` (exact log, or ``buckets`` counters)."""
        return await self.apply(
            key, Slide(limit, window, buckets), cost=cost, ban=ban, wait=wait, dryrun=dryrun, at=at, deadline=deadline
        )

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
        deadline: Optional[int] = None,
    ) -> Decision:
        """``RL.LEAKY``: leaky bucket of ``capacity`` draining ``rate`` per ``period``."""
        spec = Leaky(capacity, rate, period, nodelay, delay)
        return await self.apply(key, spec, cost=cost, ban=ban, wait=wait, dryrun=dryrun, at=at, deadline=deadline)

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
        limits: cmd.AllLimits,
        *,
        costs: Optional[Sequence[int]] = None,
        dryrun: bool = False,
        at: Optional[int] = None,
    ) -> AllDecision:
        """``RL.ALL``: every limit admits the request or none is charged (one atomic call).
        ``limits`` maps each key to its limit, or lists ``(key, limit)`` pairs (a list or a
        tuple; at most 16; in a cluster, one hash slot)."""
        return cmd.all_decision(await self._send(*cmd.all_of(limits, costs, dryrun, at)))

    async def refund(self, key: Key, count: int, *, at: Optional[int] = None) -> Optional[Decision]:
        """``RL.REFUND``: give ``count`` permits back; ``None`` if the key holds no limiter."""
        return cmd.optional_decision(await self._send(*cmd.with_at(["RL.REFUND", key, count], at)))

    async def charge(self, key: Key, count: int, *, at: Optional[int] = None) -> Optional[Decision]:
        """``RL.CHARGE``: take ``count`` permits whatever the limit — past it, a debt later
        requests wait out (token bucket, GCRA, leaky bucket and fixed window keys; sliding windows raise
        ``redis.ResponseError``); ``None`` if the key holds nothing live (nothing created)."""
        return cmd.optional_decision(await self._send(*cmd.with_at(["RL.CHARGE", key, count], at)))

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
        cmd.check_wait(self, wait)
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

    # -- policies: limits the server holds (RL.POLICY, RL.HIT; docs/policies.md) -----------

    async def hit(
        self,
        name: Union[str, bytes],
        key: Key,
        *,
        cost: int = 1,
        wait: Optional[Duration] = None,
        dryrun: bool = False,
        at: Optional[int] = None,
        deadline: Optional[int] = None,
    ) -> Decision:
        """``RL.HIT``: ``key`` judged by the server's policy ``name`` (or the key's override),
        exactly as the direct command with the policy's parameters; an unknown policy is a
        ``ResponseError`` naming it. ``deadline``: as :meth:`apply`'s."""
        cmd.check_wait(self, wait)
        return cmd.decision(await self._send(*cmd.hit(name, key, cost, wait, dryrun, at, deadline)))

    async def set_policy(
        self,
        name: Union[str, bytes],
        limit: Limit,
        *,
        ban: Optional[Duration] = None,
        clear: bool = False,
        shadow: bool = False,
        for_key: Optional[Key] = None,
    ) -> None:
        """``RL.POLICY SET``: defines (replaces, whole) policy ``name`` — or with ``for_key``
        that key's override — as ``limit`` (a :class:`Token`, :class:`Period`, :class:`Slide`
        or :class:`Leaky`). On a cluster client, on every primary."""
        await self._send_to_primaries(*cmd.policy_set(name, limit, ban, clear, shadow, for_key))

    async def get_policy(
        self, name: Union[str, bytes], *, for_key: Optional[Key] = None
    ) -> Optional[Dict[str, cmd.InfoValue]]:
        """``RL.POLICY GET``: the policy (or ``for_key``'s override) as field → value, or
        ``None``. On a cluster client, the first primary's."""
        replies = await self._send_to_primaries("RL.POLICY", "GET", name, *cmd.for_arg(for_key))
        return cmd.info(replies[0])

    async def delete_policy(self, name: Union[str, bytes], *, for_key: Optional[Key] = None) -> bool:
        """``RL.POLICY DEL``: the policy with all its overrides, or ``for_key``'s override;
        ``True`` if it existed (on any primary of a cluster client, where it is deleted from
        every primary)."""
        replies = await self._send_to_primaries("RL.POLICY", "DEL", name, *cmd.for_arg(for_key))
        return any(int(r) == 1 for r in replies)

    async def policies(self) -> List[str]:
        """``RL.POLICY LIST``: the policy names (of every primary of a cluster client, each
        once), sorted."""
        return cmd.policy_names(await self._send_to_primaries("RL.POLICY", "LIST"))

    async def policy_stats(self, name: Union[str, bytes]) -> Dict[str, int]:
        """``RL.POLICY STATS``: the policy's counters (``calls``, ``admitted``, ``limited``,
        ``shadow_limited``, ``near_limit``); on a cluster client summed over the primaries."""
        return cmd.policy_stats(await self._send_to_primaries("RL.POLICY", "STATS", name))

    # -- end commands --


async def send_once(conn: Any, args: Sequence[Arg], asking: bool = False) -> Any:
    """Sends a call that may count once on ``conn`` (an asyncio ``Connection``, the caller's to
    hold): never retried (the first copy may have counted: an error raises), and a ``WAIT t``
    call read with a timeout covering the wait (the wait plus the connection's
    ``socket_timeout``). ``asking``: ``ASKING`` first (a cluster's ``ASK`` redirection). On any
    error but the server's answer the connection is closed (its reply may still come)."""
    wait = _wait_s(args)
    timeout: Optional[float] = None  # the connection's socket_timeout
    if wait is not None and conn.socket_timeout is not None:
        timeout = math.inf if wait == 0 else wait + float(conn.socket_timeout)
    try:
        if asking:
            await conn.send_command("ASKING")
            await conn.read_response()
        await conn.send_command(*args)
        return await conn.read_response(timeout=timeout)
    except ResponseError:
        raise
    except BaseException:
        await conn.disconnect(nowait=True)
        raise


class AsyncSendsOnce:
    """Calls that may count, on a standalone ``redis.asyncio.Redis``: each sent once (a client
    set to retry re-sends a command after a connection or timeout error), a waiting one read
    with a timeout covering its wait (:func:`send_once`)."""

    async def _send_once(self, *args: Arg) -> Any:
        client = cast(Any, self)  # redis-py's connection methods are untyped
        await client.initialize()  # a single-connection client's connection
        if client.connection is not None:
            async with client._single_conn_lock:
                return await send_once(client.connection, args)
        pool = client.connection_pool
        try:
            conn = await pool.get_connection()
        except TypeError:  # redis-py 5: the command's name is required
            conn = await pool.get_connection(args[0])
        try:
            return await send_once(conn, args)
        finally:
            await pool.release(conn)


class AsyncClusterSendsOnce:
    """Calls that may count, on a ``redis.asyncio.cluster.RedisCluster``: each sent once to the
    primary of its key's slot (:func:`send_once`; redis-py's cluster retries a command after a
    connection or timeout error). A redirection (``MOVED``, ``ASK``, ``TRYAGAIN``) is followed:
    the node did not run the call. After a connection error the topology is read again on the
    next call, and the error raised."""

    async def _send_once(self, *args: Arg) -> Any:
        cluster = cast(Any, self)  # redis-py's cluster internals are untyped
        asking: Optional[str] = None
        for _ in range(int(cluster.RedisClusterRequestTTL)):
            if cluster._initialize:
                await cluster.initialize()
            if asking is not None:
                node = cluster.get_node(node_name=asking)
            else:
                node = cluster.nodes_manager.get_node_from_slot(await cluster._determine_slot(*args))
            conn = node.acquire_connection()
            try:
                if hasattr(node, "disconnect_if_needed"):  # redis-py 7+: marked after a topology change
                    await node.disconnect_if_needed(conn)
                return await send_once(conn, args, asking=asking is not None)
            except MovedError:
                cluster._initialize = True
                asking = None
            except AskError as error:
                asking = f"{error.host}:{error.port}"
            except TryAgainError:
                await asyncio.sleep(0.05)
                asking = None
            except redis.ConnectionError:
                cluster._initialize = True
                raise
            finally:
                if hasattr(node, "release"):
                    node.release(conn)
                else:  # redis-py 5: the node's free connections, as its execute_command returns them
                    node._free.append(conn)
        raise ClusterError(f"{args[0]!r}: too many cluster redirections")


# redis-py's asyncio classes inherit two disagreeing `command_info` stubs (its own typing issue).
class AsyncRateLimit(AsyncSendsOnce, AsyncRateLimitCommands, redis.asyncio.Redis):  # type: ignore[misc]
    """A ``redis.asyncio.Redis`` with the module's commands (see :class:`AsyncRateLimitCommands`).

    ``AsyncRateLimit(client)`` wraps a ``redis.asyncio.Redis`` (or a
    ``redis.asyncio.ConnectionPool``) the application already has: the same pool, connections
    and options. Otherwise it takes ``redis.asyncio.Redis``'s own arguments, or :meth:`from_url`."""

    @overload
    def __init__(self, client: Union[redis.asyncio.Redis, redis.asyncio.ConnectionPool], /) -> None: ...

    @overload
    def __init__(self, host: str = ..., port: int = ..., *args: Any, **kwargs: Any) -> None: ...

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args and not isinstance(args[0], str):
            if not wrapping.is_pool(args[0], asyncio=True):
                raise wrapping.refuse(
                    "AsyncRateLimit", args[0], "a redis.asyncio.Redis or a redis.asyncio.ConnectionPool"
                )
            wrapping.no_options_with("AsyncRateLimit", args, kwargs)
            super().__init__(connection_pool=wrapping.pool_of(args[0]))
            return
        super().__init__(*args, **kwargs)

    @classmethod
    def from_url(
        cls: Type[_Client],
        url: str,
        single_connection_client: bool = False,
        auto_close_connection_pool: Optional[bool] = None,
        **kwargs: Any,
    ) -> _Client:
        """A client from a ``redis://`` / ``rediss://`` / ``unix://`` URL (as redis-py's),
        typed as this class."""
        if auto_close_connection_pool is not None:
            kwargs["auto_close_connection_pool"] = auto_close_connection_pool
        return cast(
            _Client, cast(Any, super()).from_url(url, single_connection_client=single_connection_client, **kwargs)
        )


class AsyncRateLimitCluster(AsyncClusterSendsOnce, AsyncRateLimitCommands, redis.asyncio.cluster.RedisCluster):  # type: ignore[misc]
    """A ``redis.asyncio.cluster.RedisCluster`` with the module's commands (``RL.ALL``: every
    key in one hash slot — use hash tags).

    ``AsyncRateLimitCluster(cluster_client)`` wraps a ``RedisCluster`` the application already
    has (its topology and node connections, shared; closing the wrapper leaves them open)."""

    if TYPE_CHECKING:
        # redis-py < 6.1 types its cluster clients with the standalone one's `connection_pool`
        # (a protocol member they lack): without this, mypy calls the class abstract there.
        connection_pool: Any = None

    @overload
    def __init__(self, client: redis.asyncio.cluster.RedisCluster, /) -> None: ...

    @overload
    def __init__(self, host: Optional[str] = ..., port: int = ..., *args: Any, **kwargs: Any) -> None: ...

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args and args[0] is not None and not isinstance(args[0], str):
            if not isinstance(args[0], redis.asyncio.cluster.RedisCluster):
                raise wrapping.refuse("AsyncRateLimitCluster", args[0], "a redis.asyncio.cluster.RedisCluster")
            wrapping.no_options_with("AsyncRateLimitCluster", args, kwargs)
            wrapping.borrow(self, args[0])
            return
        super().__init__(*args, **kwargs)

    @classmethod
    def from_url(cls: Type[_Cluster], url: str, **kwargs: Any) -> _Cluster:
        """A cluster client from a ``redis://`` URL of one node (as redis-py's), typed as this
        class."""
        return cast(_Cluster, cast(Any, super()).from_url(url, **kwargs))

    async def aclose(self) -> None:
        """Closes the connections, unless they belong to a wrapped client."""
        if not wrapping.borrowed(self):
            await super().aclose()

    def __del__(self, *args: Any) -> None:
        delete = getattr(super(), "__del__", None)
        if delete is not None and not wrapping.borrowed(self):
            delete(*args)

"""The typed sync clients: :class:`RateLimit` (a ``redis.Redis``) and :class:`RateLimitCluster`
(a ``redis.cluster.RedisCluster``). Every method sends exactly one command, in one round trip.

Wrap the client the application already has: ``RateLimit(redis_client)`` (or its
``ConnectionPool``), ``RateLimitCluster(cluster_client)`` — same connections, same options.

Everything redis-py does still works on them (``r.get``, ``r.pipeline()``, ``r.info()``): the
module's ``RL.INFO`` is :meth:`~RateLimitCommands.limiter_info`, because ``info()`` is
redis-py's server ``INFO``.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Dict, List, Optional, Sequence, Type, TypeVar, Union, cast, overload

import redis
import redis.cluster
from redis.exceptions import AskError, ClusterError, MovedError, ResponseError, TryAgainError

from . import commands as cmd
from . import wrapping
from .decision import AllDecision, Decision, LeaseDecision
from .specs import Arg, Duration, Leaky, Limit, Period, Slide, Token, duration_ms

Key = Union[str, bytes]
_Client = TypeVar("_Client", bound="RateLimit")
_Cluster = TypeVar("_Cluster", bound="RateLimitCluster")


#: The module's commands that change a limiter: a second copy may count again.
COUNTING = frozenset(
    {"RL.TOKEN", "RL.PERIOD", "RL.SLIDE", "RL.LEAKY", "CL.THROTTLE", "RL.ALL", "RL.HIT"}
    | {"RL.ACQUIRE", "RL.REFUND", "RL.CHARGE", "RL.RELEASE"}
)


def _wait_s(args: Sequence[Arg]) -> Optional[float]:
    """The seconds a call's ``WAIT t`` (in ms, as :mod:`commands` writes it) may wait; ``0`` for
    a wait without limit; ``None`` without ``WAIT``."""
    for i in range(2, len(args) - 1):
        if isinstance(args[i], str) and args[i] == "WAIT":
            ms = duration_ms(cast(Duration, args[i + 1]))
            return 0 if ms is None else ms / 1000  # a form only the server reads: no read timeout
    return None


class RateLimitCommands:
    """The module's commands for a redis-py sync client (a mixin over ``execute_command``)."""

    def _send(self, *args: Arg, **options: Any) -> Any:
        try:
            if str(args[0]).upper() in COUNTING and isinstance(self, (SendsOnce, ClusterSendsOnce)):
                return self._send_once(*args, **options)
            return cast(Any, self).execute_command(*args, **options)
        except ResponseError as error:
            missing = cmd.module_missing(error, str(args[0]))
            if missing is not None:
                raise missing from error
            raise

    def _send_to_primaries(self, *args: Arg) -> List[Any]:
        """One reply per node: every primary of a cluster client (each holds its own policy
        table), or the one server."""
        if isinstance(self, redis.cluster.RedisCluster):
            return [self._send(*args, target_nodes=node) for node in cast(Any, self).get_primaries()]
        return [self._send(*args)]

    # -- begin commands: aio.py's AsyncRateLimitCommands has these, generated (gen_aio.py) --

    def apply(
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
        return cmd.decision(self._send(*cmd.limiting(key, limit, cost, ban, wait, dryrun, at, deadline)))

    def token(
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
        return self.apply(
            key,
            Token(capacity, rate, period, step),
            cost=cost,
            ban=ban,
            wait=wait,
            dryrun=dryrun,
            at=at,
            deadline=deadline,
        )

    def period(
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
        return self.apply(
            key, Period(limit, period, align), cost=cost, ban=ban, wait=wait, dryrun=dryrun, at=at, deadline=deadline
        )

    def slide(
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
        return self.apply(
            key, Slide(limit, window, buckets), cost=cost, ban=ban, wait=wait, dryrun=dryrun, at=at, deadline=deadline
        )

    def leaky(
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
        return self.apply(key, spec, cost=cost, ban=ban, wait=wait, dryrun=dryrun, at=at, deadline=deadline)

    def throttle(
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
        return cmd.throttle_decision(self._send(*cmd.throttle(key, max_burst, count, period_s, quantity, dryrun, at)))

    def all(
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
        return cmd.all_decision(self._send(*cmd.all_of(limits, costs, dryrun, at)))

    def refund(self, key: Key, count: int, *, at: Optional[int] = None) -> Optional[Decision]:
        """``RL.REFUND``: give ``count`` permits back; ``None`` if the key holds no limiter."""
        return cmd.optional_decision(self._send(*cmd.with_at(["RL.REFUND", key, count], at)))

    def charge(self, key: Key, count: int, *, at: Optional[int] = None) -> Optional[Decision]:
        """``RL.CHARGE``: take ``count`` permits whatever the limit — past it, a debt later
        requests wait out (token bucket, GCRA, leaky bucket and fixed window keys; sliding windows raise
        ``redis.ResponseError``); ``None`` if the key holds nothing live (nothing created)."""
        return cmd.optional_decision(self._send(*cmd.with_at(["RL.CHARGE", key, count], at)))

    def acquire(
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
        return cmd.lease_decision(self._send(*cmd.acquire(key, limit, lease, id, wait, dryrun, at)))

    def release(self, key: Key, id: Union[str, bytes], *, at: Optional[int] = None) -> bool:
        """``RL.RELEASE``: ``True`` if the lease was held (and is now gone)."""
        return bool(self._send(*cmd.with_at(["RL.RELEASE", key, id], at)))

    def peek(self, key: Key) -> Optional[Decision]:
        """``RL.PEEK``: what a dry-run request of cost 1 would get now; ``None`` if no limiter."""
        return cmd.optional_decision(self._send("RL.PEEK", key))

    def limiter_info(self, key: Key) -> Optional[Dict[str, cmd.InfoValue]]:
        """``RL.INFO``: the stored parameters and state; ``None`` if no limiter."""
        return cmd.info(self._send("RL.INFO", key))

    # -- policies: limits the server holds (RL.POLICY, RL.HIT; docs/policies.md) -----------

    def hit(
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
        return cmd.decision(self._send(*cmd.hit(name, key, cost, wait, dryrun, at, deadline)))

    def set_policy(
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
        self._send_to_primaries(*cmd.policy_set(name, limit, ban, clear, shadow, for_key))

    def get_policy(
        self, name: Union[str, bytes], *, for_key: Optional[Key] = None
    ) -> Optional[Dict[str, cmd.InfoValue]]:
        """``RL.POLICY GET``: the policy (or ``for_key``'s override) as field → value, or
        ``None``. On a cluster client, the first primary's."""
        replies = self._send_to_primaries("RL.POLICY", "GET", name, *cmd.for_arg(for_key))
        return cmd.info(replies[0])

    def delete_policy(self, name: Union[str, bytes], *, for_key: Optional[Key] = None) -> bool:
        """``RL.POLICY DEL``: the policy with all its overrides, or ``for_key``'s override;
        ``True`` if it existed (on any primary of a cluster client, where it is deleted from
        every primary)."""
        replies = self._send_to_primaries("RL.POLICY", "DEL", name, *cmd.for_arg(for_key))
        return any(int(r) == 1 for r in replies)

    def policies(self) -> List[str]:
        """``RL.POLICY LIST``: the policy names (of every primary of a cluster client, each
        once), sorted."""
        return cmd.policy_names(self._send_to_primaries("RL.POLICY", "LIST"))

    def policy_stats(self, name: Union[str, bytes]) -> Dict[str, int]:
        """``RL.POLICY STATS``: the policy's counters (``calls``, ``admitted``, ``limited``,
        ``shadow_limited``, ``near_limit``); on a cluster client summed over the primaries."""
        return cmd.policy_stats(self._send_to_primaries("RL.POLICY", "STATS", name))

    # -- end commands --


def send_once(client: Any, args: Sequence[Arg], options: Dict[str, Any], asking: bool = False) -> Any:
    """Sends a call that may count once on ``client`` (a standalone ``redis.Redis``: the
    application's, or a cluster node's): never retried (a client set to retry —
    ``retry_on_error``, ``retry_on_timeout`` — re-sends a command after a connection or timeout
    error, and the first copy may have counted: it raises instead), and a ``WAIT t`` call reads
    its answer with a socket timeout covering the wait (the wait plus the client's
    ``socket_timeout``). ``asking``: ``ASKING`` first, on the same connection (a cluster's
    ``ASK`` redirection)."""
    pool = client.connection_pool
    own = client.connection
    conn: Any
    if own is not None:
        conn = own
    else:
        try:
            conn = pool.get_connection()
        except TypeError:  # redis-py 5: the command's name is required
            conn = pool.get_connection(args[0])
    lock = getattr(client, "single_connection_lock", None) if own is not None else None
    if lock is not None:
        lock.acquire()
    wait = _wait_s(args)
    try:
        if asking:
            conn.send_command("ASKING")
            client.parse_response(conn, "ASKING")
        conn.send_command(*args)
        base = conn.socket_timeout
        sock = getattr(conn, "_sock", None)
        if wait is not None and base is not None and sock is not None:
            sock.settimeout(None if wait == 0 else wait + float(base))
        try:
            return client.parse_response(conn, str(args[0]), **options)
        finally:
            sock = getattr(conn, "_sock", None)
            if sock is not None:
                sock.settimeout(base)
    except (redis.ConnectionError, redis.TimeoutError):
        conn.disconnect()
        raise
    finally:
        if lock is not None:
            lock.release()
        if own is None:
            pool.release(conn)


class SendsOnce:
    """Calls that may count, on a standalone ``redis.Redis``: each sent once, a waiting one
    read with a timeout covering its wait (:func:`send_once`)."""

    def _send_once(self, *args: Arg, **options: Any) -> Any:
        return send_once(self, args, options)


class ClusterSendsOnce:
    """Calls that may count, on a ``redis.cluster.RedisCluster``: each sent once to the primary
    of its key's slot (:func:`send_once`; redis-py's cluster retries a command after a
    connection or timeout error). A redirection (``MOVED``, ``ASK``, ``TRYAGAIN``) is followed:
    the node did not run the call. After a connection error the cluster's topology is read
    again, and the error raised."""

    def _send_once(self, *args: Arg, **options: Any) -> Any:
        cluster = cast(Any, self)  # redis-py's cluster internals are untyped
        asking: Optional[str] = None
        for _ in range(int(cluster.RedisClusterRequestTTL)):
            if asking is not None:
                node = cluster.get_node(node_name=asking)
            else:
                node = cluster.nodes_manager.get_node_from_slot(cluster.determine_slot(*args))
            try:
                return send_once(cluster.get_redis_connection(node), args, options, asking=asking is not None)
            except MovedError:
                cluster.nodes_manager.initialize()
                asking = None
            except AskError as error:
                asking = f"{error.host}:{error.port}"
            except TryAgainError:
                time.sleep(0.05)
                asking = None
            except redis.ConnectionError:
                with contextlib.suppress(redis.RedisError):
                    cluster.nodes_manager.initialize()
                raise
        raise ClusterError(f"{args[0]!r}: too many cluster redirections")


class RateLimit(SendsOnce, RateLimitCommands, redis.Redis):
    """A ``redis.Redis`` with the module's commands (see :class:`RateLimitCommands`).

    ``RateLimit(client)`` wraps a ``redis.Redis`` (or a ``redis.ConnectionPool``) the
    application already has: the same pool, connections and options. Otherwise it takes
    ``redis.Redis``'s own arguments (``RateLimit(host=..., port=...)``, :meth:`from_url`)."""

    @overload
    def __init__(self, client: Union[redis.Redis, redis.ConnectionPool], /) -> None: ...

    @overload
    def __init__(self, host: str = ..., port: int = ..., *args: Any, **kwargs: Any) -> None: ...

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args and not isinstance(args[0], str):
            if not wrapping.is_pool(args[0], asyncio=False):
                raise wrapping.refuse("RateLimit", args[0], "a redis.Redis or a redis.ConnectionPool")
            wrapping.no_options_with("RateLimit", args, kwargs)
            super().__init__(connection_pool=wrapping.pool_of(args[0]))
            return
        super().__init__(*args, **kwargs)

    @classmethod
    def from_url(cls: Type[_Client], url: str, **kwargs: Any) -> _Client:
        """A client from a ``redis://`` / ``rediss://`` / ``unix://`` URL (as redis-py's),
        typed as this class."""
        return cast(_Client, cast(Any, super()).from_url(url, **kwargs))


class RateLimitCluster(ClusterSendsOnce, RateLimitCommands, redis.cluster.RedisCluster):
    """A ``redis.cluster.RedisCluster`` with the module's commands; the cluster routes each
    command by its key (``RL.ALL``: every key in one hash slot — use hash tags).

    ``RateLimitCluster(cluster_client)`` wraps a ``RedisCluster`` the application already has
    (its topology and node connections, shared; closing the wrapper leaves them open)."""

    @overload
    def __init__(self, client: redis.cluster.RedisCluster, /) -> None: ...

    @overload
    def __init__(self, host: Optional[str] = ..., port: int = ..., *args: Any, **kwargs: Any) -> None: ...

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args and args[0] is not None and not isinstance(args[0], str):
            if not isinstance(args[0], redis.cluster.RedisCluster):
                raise wrapping.refuse("RateLimitCluster", args[0], "a redis.cluster.RedisCluster")
            wrapping.no_options_with("RateLimitCluster", args, kwargs)
            wrapping.borrow(self, args[0])
            return
        super().__init__(*args, **kwargs)

    @classmethod
    def from_url(cls: Type[_Cluster], url: str, **kwargs: Any) -> _Cluster:
        """A cluster client from a ``redis://`` URL of one node (as redis-py's), typed as this
        class."""
        return cast(_Cluster, cast(Any, super()).from_url(url, **kwargs))

    def close(self, *args: Any, **kwargs: Any) -> None:
        """Closes the connections, unless they belong to a wrapped client."""
        if not wrapping.borrowed(self):
            super().close(*args, **kwargs)

    def __del__(self) -> None:
        delete = getattr(super(), "__del__", None)
        if delete is not None and not wrapping.borrowed(self):
            delete()

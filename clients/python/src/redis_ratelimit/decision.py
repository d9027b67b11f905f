"""What a limiting command answers: :class:`Decision`, and the IETF ``RateLimit`` header fields.

Every limiting command of the module (``RL.TOKEN``, ``RL.PERIOD``, ``RL.SLIDE``, ``RL.LEAKY``,
``RL.ALL``, ``RL.ACQUIRE``, ``RL.REFUND``, ``RL.PEEK``) replies with five integers
``[allowed, limit, remaining, retry_after_ms, reset_after_ms]``; a :class:`Decision` is that
reply with names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple


def _ceil_seconds(ms: int) -> int:
    """Whole seconds, rounded up, of a non-negative duration in ms."""
    return -(-ms // 1000)


def _sf_string(value: str) -> str:
    """A structured-field string (RFC 8941 §3.3.3): quoted, ``\\`` and ``"`` escaped."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True)
class Decision:
    """The module's answer to one request.

    - ``allowed``: the request is admitted (and was counted, unless it was a dry run).
    - ``limit``: the configured maximum (capacity of a bucket, limit of a window).
    - ``remaining``: whole permits left after this request, ``0 … limit``.
    - ``retry_after_ms``: refused: ms until the same request would be admitted, ``-1`` if it
      never can (its cost exceeds the limit). Admitted: ``0``, except a leaky bucket in delay
      mode, where it is the delay the caller must wait before acting.
    - ``reset_after_ms``: ms until the limiter is back to its initial state.
    """

    allowed: bool
    limit: int
    remaining: int
    retry_after_ms: int
    reset_after_ms: int

    def __bool__(self) -> bool:
        return self.allowed

    def headers(self, policy: str = "default", window_s: Optional[int] = None) -> Dict[str, str]:
        """The response header fields of draft-ietf-httpapi-ratelimit-headers-10.

        ``RateLimit-Policy: "<policy>";q=<limit>[;w=<window_s>]`` (the quota; ``w`` only when
        the window in seconds is given: a token or leaky bucket has none),
        ``RateLimit: "<policy>";r=<remaining>;t=<seconds until the limiter is back to its
        initial state, rounded up>``, and on a refused request that can be retried
        ``Retry-After: <retry_after_ms in seconds, rounded up>`` (a request that can never be
        admitted gets no ``Retry-After``).
        """
        name = _sf_string(policy)
        quota = f"{name};q={self.limit}"
        if window_s is not None:
            quota += f";w={window_s}"
        fields = {
            "RateLimit-Policy": quota,
            "RateLimit": f"{name};r={self.remaining};t={_ceil_seconds(max(0, self.reset_after_ms))}",
        }
        if not self.allowed and self.retry_after_ms >= 0:
            fields["Retry-After"] = str(_ceil_seconds(self.retry_after_ms))
        return fields


@dataclass(frozen=True)
class LeaseDecision(Decision):
    """The answer of ``RL.ACQUIRE``: a :class:`Decision` plus the lease ``id`` (``None`` when
    refused or under ``dryrun``). Give the id to ``release`` (or re-acquire with it to renew)."""

    id: Optional[bytes] = None


@dataclass(frozen=True)
class AllDecision(Decision):
    """The answer of ``RL.ALL``: the fields of the *binding* limit (refused: the refusing limit
    with the longest wait; admitted: the one with the fewest permits left), ``index`` of that
    limit (0-based, in the order given) and ``details``: for each limit, the answer its single
    command would give now without changing anything."""

    index: int = 0
    details: Tuple[Decision, ...] = ()

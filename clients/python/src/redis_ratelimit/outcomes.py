"""The middleware's decisions, counted in this process (no Redis call): per middleware policy
name (its ``RateLimit-Policy`` name, ``"default"`` unless given) and outcome — ``admitted``,
``limited``, or ``error`` (Redis could not be reached: let through with ``fail_open``, else
raised). :class:`redis_ratelimit.prometheus.RateLimitCollector` exposes them as
``ratelimit_middleware_decisions_total``."""

from __future__ import annotations

import threading
from typing import Dict, List, Tuple

OUTCOMES = ("admitted", "limited", "error")

_counts: Dict[str, Dict[str, int]] = {}
_lock = threading.Lock()


def count_decision(policy: str, outcome: str) -> None:
    """Counts one decision of the middleware named ``policy``."""
    with _lock:
        counts = _counts.setdefault(policy, dict.fromkeys(OUTCOMES, 0))
        counts[outcome] = counts.get(outcome, 0) + 1


def decision_counts() -> List[Tuple[str, Dict[str, int]]]:
    """A copy: ``[(policy, {"admitted": n, "limited": n, "error": n}), ...]``."""
    with _lock:
        return [(policy, dict(counts)) for policy, counts in _counts.items()]

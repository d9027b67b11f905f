"""redis-ratelimit: typed Python clients for the redis-ratelimit Redis module.

- :class:`RateLimit` / :class:`RateLimitCluster` (redis-py, sync) and :class:`AsyncRateLimit` /
  :class:`AsyncRateLimitCluster` (redis-py asyncio): one method per module command, one round
  trip each, answering a frozen :class:`Decision` (with ``headers()`` for HTTP).
- :mod:`redis_ratelimit.middleware`: an ASGI middleware (Starlette, FastAPI).
- :mod:`redis_ratelimit.limits`: storages for the ``limits`` library (Flask-Limiter, SlowAPI),
  registered for the ``ratelimit://`` URI schemes when imported.
"""

from .aio import AsyncRateLimit, AsyncRateLimitCluster, AsyncRateLimitCommands
from .client import RateLimit, RateLimitCluster, RateLimitCommands
from .commands import InfoValue, ModuleNotLoadedError
from .decision import AllDecision, Decision, LeaseDecision
from .specs import Duration, Leaky, Limit, Period, Slide, Token

__version__ = "0.3.0"

__all__ = [
    "AllDecision",
    "AsyncRateLimit",
    "AsyncRateLimitCluster",
    "AsyncRateLimitCommands",
    "Decision",
    "Duration",
    "InfoValue",
    "Leaky",
    "LeaseDecision",
    "Limit",
    "ModuleNotLoadedError",
    "Period",
    "RateLimit",
    "RateLimitCluster",
    "RateLimitCommands",
    "Slide",
    "Token",
]

"""redis-ratelimit: typed Python clients for the redis-ratelimit Redis module.

- :class:`RateLimit` / :class:`RateLimitCluster` (redis-py, sync) and :class:`AsyncRateLimit` /
  :class:`AsyncRateLimitCluster` (redis-py asyncio): one method per module command, one round
  trip each, answering a frozen :class:`Decision` (with ``headers()`` for HTTP).
- :mod:`redis_ratelimit.middleware`: an ASGI middleware (Starlette, FastAPI).
- :mod:`redis_ratelimit.limits`: storages for the ``limits`` library (Flask-Limiter, SlowAPI),
  registered for the ``ratelimit://`` URI schemes when imported.
- :class:`PermitBlock` / :class:`AsyncPermitBlock`: a hot key's permits taken ``size`` at a time
  and handed out locally (docs/clients.md, "Permit blocks").
"""

from .aio import AsyncRateLimit, AsyncRateLimitCluster, AsyncRateLimitCommands
from .client import RateLimit, RateLimitCluster, RateLimitCommands
from .commands import InfoValue, ModuleNotLoadedError
from .decision import AllDecision, Decision, LeaseDecision
from .permit_block import AsyncPermitBlock, BlockLimit, BlockStats, PermitBlock
from .specs import Duration, Leaky, Limit, Period, Slide, Throttle, Token

__version__ = "0.3.0"

__all__ = [
    "AllDecision",
    "AsyncPermitBlock",
    "AsyncRateLimit",
    "AsyncRateLimitCluster",
    "AsyncRateLimitCommands",
    "BlockLimit",
    "BlockStats",
    "Decision",
    "Duration",
    "InfoValue",
    "Leaky",
    "LeaseDecision",
    "Limit",
    "ModuleNotLoadedError",
    "Period",
    "PermitBlock",
    "RateLimit",
    "RateLimitCluster",
    "RateLimitCommands",
    "Slide",
    "Throttle",
    "Token",
]

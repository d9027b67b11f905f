"""FastAPI on the module, two ways: SlowAPI with `storage_uri="ratelimit://HOST:PORT"`, and the
package's own ASGI middleware (one RL.* command per request, IETF RateLimit headers).

    python3 examples/python/fastapi_app.py 127.0.0.1:6379   # 7 requests to each app, printed

Needs the package (`pip install redis_ratelimit-<version>-py3-none-any.whl`, see its README),
`fastapi slowapi` (and httpx for the test client).
"""

import sys
from typing import Dict

import redis.asyncio
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient
from slowapi import Limiter, _rate_limit_exceeded_handler
from slowapi.errors import RateLimitExceeded
from slowapi.util import get_remote_address

from redis_ratelimit import AsyncRateLimit, Token
from redis_ratelimit.limits import register
from redis_ratelimit.middleware import RateLimitMiddleware

redis_address = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:6379"

# readme-begin
register()  # the ratelimit:// storage schemes, for limits (SlowAPI's engine)
limiter = Limiter(key_func=get_remote_address, storage_uri=f"ratelimit://{redis_address}")
app = FastAPI()
app.state.limiter = limiter
app.add_exception_handler(RateLimitExceeded, _rate_limit_exceeded_handler)  # type: ignore[arg-type]  # SlowAPI's


@app.get("/")
@limiter.limit("5/minute")
async def index(request: Request) -> Dict[str, str]:
    return {"hello": "world"}


# readme-end


# readme-middleware-begin
redis_client = redis.asyncio.Redis.from_url(f"redis://{redis_address}")  # the application's own client
api = FastAPI()
api.add_middleware(
    RateLimitMiddleware,
    client=AsyncRateLimit(redis_client),
    limit=Token(5, 1, "1m"),  # bucket of 5, +1 per minute
    key=lambda request: request.headers.get("x-api-key"),  # None: not limited
)


@api.get("/")
async def hello() -> Dict[str, str]:
    return {"hello": "world"}


# readme-middleware-end


def main() -> None:
    with TestClient(app) as http:
        for i in range(1, 8):
            reply = http.get("/")
            print(f"slowapi {i} {reply.status_code}")
    with TestClient(api) as http:
        for i in range(1, 8):
            reply = http.get("/", headers={"x-api-key": "key42"})
            retry = f" retry_after={reply.headers['retry-after']}" if reply.status_code == 429 else ""
            print(f"middleware {i} {reply.status_code} {reply.headers['ratelimit']}{retry}")


if __name__ == "__main__":
    main()

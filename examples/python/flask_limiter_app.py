"""Flask-Limiter on the module: `storage_uri="ratelimit://HOST:PORT"` (redis_ratelimit.limits).

    python3 examples/python/flask_limiter_app.py 127.0.0.1:6379          # 7 requests, printed
    python3 examples/python/flask_limiter_app.py 127.0.0.1:6379 --serve  # serve on :5000

Needs the package (`pip install redis_ratelimit-<version>-py3-none-any.whl`, see its README)
and `flask-limiter`. Each strategy is one module command per
request: "moving-window" is the exact RL.SLIDE log (no list of timestamps per key),
"fixed-window" an RL.PERIOD counter, "sliding-window-counter" RL.SLIDE BUCKETS 1.
"""

import sys

from flask import Flask
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address

from redis_ratelimit.limits import register

redis_address = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:6379"

# readme-begin
register()  # the ratelimit:// storage schemes, for limits (Flask-Limiter's engine)
app = Flask(__name__)
limiter = Limiter(
    get_remote_address,
    app=app,
    storage_uri=f"ratelimit://{redis_address}",
    strategy="moving-window",
    headers_enabled=True,
)


@app.route("/")
@limiter.limit("5 per minute")
def index() -> str:
    return "hello"


# readme-end


def main() -> None:
    if "--serve" in sys.argv:
        app.run()
        return
    with app.test_client() as http:
        for i in range(1, 8):
            reply = http.get("/")
            if reply.status_code == 200:
                print(f"{i} 200 remaining={reply.headers['X-RateLimit-Remaining']}")
            else:
                print(f"{i} {reply.status_code} retry_after={reply.headers['Retry-After']}")


if __name__ == "__main__":
    main()

"""RL.TOKEN from Python with redis-py.

    python3 examples/python/quickstart.py 127.0.0.1:6379

Seven requests against a bucket of 5 tokens refilled 1 per minute: 5 admitted, 2 limited.
tests/examples.rs runs it against a real server and checks the output.
"""

import sys

import redis


def main(addr: str) -> None:
    host, port = addr.rsplit(":", 1)
    r = redis.Redis(host=host, port=int(port))
    admitted = 0
    # readme-begin
    for i in range(1, 8):
        allowed, limit, remaining, retry_ms, reset_ms = r.execute_command(
            "RL.TOKEN", "api:key42", 5, 1, "1m"  # bucket of 5, +1 token per minute
        )
        if not allowed:
            print(f"{i} limited retry_after_ms={retry_ms}")  # HTTP 429, Retry-After
            continue
        admitted += 1
        print(f"{i} allowed remaining={remaining} limit={limit}")
    # readme-end
    print(f"admitted {admitted} of 7")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:6379")

"""A minimal HTTP service limited by RL.PERIOD, with the IETF RateLimit headers.

    python3 examples/python/http_service.py --redis 127.0.0.1:6379 [--port 8080]
                                            [--limit 100] [--window 60]

Every request (keyed by the client's X-Api-Key header, or its address) costs one permit of a
fixed window of `limit` per `window` seconds. Replies carry the headers of
draft-ietf-httpapi-ratelimit-headers-10:

    RateLimit-Policy: "default";q=100;w=60     quota 100 per 60 s window
    RateLimit: "default";r=42;t=17             42 left, window resets in 17 s

and a refused request gets 429 Too Many Requests with Retry-After (seconds). Standard library
only, besides redis-py. It prints "listening on HOST:PORT" once it serves (port 0 picks a free
one); tests/examples.rs runs it on loopback and checks real HTTP replies.
"""

from __future__ import annotations

import argparse
import http.server
import json

import redis


def make_handler(r: redis.Redis, limit: int, window: int) -> type[http.server.BaseHTTPRequestHandler]:
    policy = f'"default";q={limit};w={window}'

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            # readme-begin
            client = self.headers.get("X-Api-Key") or self.client_address[0]
            allowed, _limit, remaining, retry_ms, reset_ms = r.execute_command(
                "RL.PERIOD", f"http:{client}", limit, f"{window}s"
            )
            reset_s = -(-reset_ms // 1000)  # seconds, rounded up
            if allowed:
                status, body = 200, {"ok": True, "path": self.path}
            else:
                status, body = 429, {"error": "too many requests", "retry_after_ms": retry_ms}
            payload = json.dumps(body).encode() + b"\n"
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.send_header("RateLimit-Policy", policy)
            self.send_header("RateLimit", f'"default";r={remaining};t={reset_s}')
            if not allowed:
                self.send_header("Retry-After", str(-(-retry_ms // 1000)))
            self.end_headers()
            # readme-end
            self.wfile.write(payload)

        def log_message(self, format: str, *args: object) -> None:  # keep stdout for the address line
            pass

    return Handler


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--redis", default="127.0.0.1:6379", help="HOST:PORT of the server")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--limit", type=int, default=100)
    p.add_argument("--window", type=int, default=60, help="seconds")
    a = p.parse_args()
    host, port = a.redis.rsplit(":", 1)
    r = redis.Redis(host=host, port=int(port))
    r.ping()
    server = http.server.ThreadingHTTPServer((a.host, a.port), make_handler(r, a.limit, a.window))
    bound = server.server_address[0]
    bound_host = bound if isinstance(bound, str) else bound.decode()
    print(f"listening on {bound_host}:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()

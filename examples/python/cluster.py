"""Per-user limiters on a Redis Cluster with redis-py's cluster client.

    python3 examples/python/cluster.py 127.0.0.1:7000

The client routes RL.* like any single-key command (the module declares its key in COMMAND
INFO). A user's limiters share a {hash tag}, so they live in one slot on one master: the
user's state moves together when slots are resharded, and one node answers for the user.
Twenty users spread over the masters; each makes 12 API calls (10 per minute allowed) and 4
login attempts (3 per 15 minutes). tests/examples.rs starts a 3-master cluster and checks the
output.
"""

from __future__ import annotations

import sys

from redis.cluster import ClusterNode, RedisCluster


def main(addr: str) -> None:
    host, port = addr.rsplit(":", 1)
    rc = RedisCluster(startup_nodes=[ClusterNode(host, int(port))])
    nodes: set[str] = set()
    api_ok = login_ok = 0
    # readme-begin
    for n in range(20):
        api, login = f"{{user:{n}}}:api", f"{{user:{n}}}:login"  # one slot per user
        for _ in range(12):
            allowed, *_ = rc.execute_command("RL.SLIDE", api, 10, "1m")
            api_ok += allowed
        for _ in range(4):
            allowed, *_ = rc.execute_command("RL.PERIOD", login, 3, "15m")
            login_ok += allowed
        # readme-end
        assert rc.keyslot(api) == rc.keyslot(login)
        nodes.add(rc.get_node_from_key(api).name)
    print(f"users=20 masters_used={len(nodes)} api_admitted={api_ok} login_admitted={login_ok}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:7000")

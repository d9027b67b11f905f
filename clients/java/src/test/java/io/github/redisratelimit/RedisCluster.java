package io.github.redisratelimit;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;

/**
 * A real 3-master Redis Cluster for one test class: three {@link RedisServer} cluster nodes with
 * the module (free ports, their bus ports free too), joined by {@code redis-cli --cluster create},
 * ready when every node reports {@code cluster_state:ok} — all within a startup deadline; every
 * node stopped by its own process handle on {@link #close()}.
 */
public final class RedisCluster implements AutoCloseable {

    private static final long STARTUP_DEADLINE_MS = 60_000;

    private final List<RedisServer> nodes = new ArrayList<>();

    private RedisCluster() {
    }

    /** @return a started cluster, all slots assigned, state ok */
    public static RedisCluster start() {
        return start(null);
    }

    /**
     * @param password every node's {@code requirepass} and {@code masterauth}, or null for none
     *                 (the nodes' URIs carry it)
     * @return a started cluster, all slots assigned, state ok
     */
    public static RedisCluster start(String password) {
        RedisCluster c = new RedisCluster();
        try {
            for (int i = 0; i < 3; i++) {
                c.nodes.add(RedisServer.start(true, password));
            }
            long deadline = System.currentTimeMillis() + STARTUP_DEADLINE_MS;
            List<String> cmd = new ArrayList<>(List.of("redis-cli", "--cluster", "create"));
            c.nodes.forEach(n -> cmd.add("127.0.0.1:" + n.port()));
            cmd.addAll(List.of("--cluster-replicas", "0", "--cluster-yes"));
            if (password != null) {
                cmd.addAll(List.of("-a", password, "--no-auth-warning"));
            }
            Process create = new ProcessBuilder(cmd).redirectErrorStream(true).start();
            byte[] out = create.getInputStream().readAllBytes();
            if (!create.waitFor(Math.max(1, deadline - System.currentTimeMillis()), TimeUnit.MILLISECONDS)) {
                create.destroyForcibly();
                throw new IllegalStateException("redis-cli --cluster create did not finish in time");
            }
            if (create.exitValue() != 0) {
                throw new IllegalStateException("redis-cli --cluster create failed: " + new String(out));
            }
            for (RedisServer n : c.nodes) {
                c.awaitOk(n, deadline);
            }
            return c;
        }
        catch (IOException | RuntimeException e) {
            c.close();
            throw new IllegalStateException("the cluster did not start: " + e.getMessage(), e);
        }
        catch (InterruptedException e) {
            c.close();
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    private void awaitOk(RedisServer n, long deadline) throws InterruptedException {
        RedisClient admin = RedisClient.create(n.uri());
        try (StatefulRedisConnection<String, String> conn = admin.connect()) {
            while (!conn.sync().clusterInfo().contains("cluster_state:ok")) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("node " + n.port() + " did not reach cluster_state:ok in time");
                }
                Thread.sleep(50);
            }
        }
        finally {
            admin.shutdown();
        }
    }

    /** @return the nodes */
    public List<RedisServer> nodes() {
        return nodes;
    }

    /** @return the nodes' URIs, the seeds of a cluster client */
    public String[] uris() {
        return nodes.stream().map(RedisServer::uri).toArray(String[]::new);
    }

    @Override
    public void close() {
        nodes.forEach(RedisServer::close);
    }
}

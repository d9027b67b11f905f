package io.github.redisratelimit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import io.lettuce.core.KillArgs;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisCommandExecutionException;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.SlotHash;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;

/**
 * The typed client on a real 3-master Redis Cluster with a password ({@code requirepass} and
 * {@code masterauth} on every node; the seeds' URIs carry it): each call on its key's node.
 */
class ClusterTest {

    private static RedisCluster cluster;
    private static RateLimitClient rl;

    @BeforeAll
    static void startCluster() {
        cluster = RedisCluster.start("cluster-secret");
        rl = RateLimitClient.createCluster(cluster.uris());
    }

    @AfterAll
    static void stopCluster() {
        if (rl != null) {
            rl.close();
        }
        if (cluster != null) {
            cluster.close();
        }
    }

    private static String key(String name) {
        return "cl:" + name + ":" + System.nanoTime();
    }

    /** The ports of the nodes holding {@code key} (a plain connection to each, no routing: a node
     *  that does not own the key's slot answers MOVED). */
    private static List<Integer> holders(String key) {
        List<Integer> ports = new ArrayList<>();
        for (RedisServer n : cluster.nodes()) {
            RedisClient c = RedisClient.create(n.uri());
            try (StatefulRedisConnection<String, String> conn = c.connect()) {
                if (conn.sync().exists(key) == 1) {
                    ports.add(n.port());
                }
            }
            catch (RedisCommandExecutionException e) {
                assertThat(e).hasMessageStartingWith("MOVED");
            }
            finally {
                c.shutdown();
            }
        }
        return ports;
    }

    /** Closes every client connection on every node (the test's own admin connection excepted). */
    private static void dropAllConnections() {
        for (RedisServer n : cluster.nodes()) {
            RedisClient c = RedisClient.create(n.uri());
            try (StatefulRedisConnection<String, String> conn = c.connect()) {
                conn.sync().clientKill(KillArgs.Builder.typeNormal().skipme());
            }
            finally {
                c.shutdown();
            }
        }
    }

    @Test
    void keysInDifferentSlotsAreDecidedOnTheNodesThatOwnThem() {
        // redis-cli gives 3 masters the slot ranges 0-5460, 5461-10922, 10923-16383: one key in each
        String[] keys = new String[3];
        for (int i = 0; keys[0] == null || keys[1] == null || keys[2] == null; i++) {
            String k = "cl:slots:" + System.nanoTime() + ":" + i;
            int slot = SlotHash.getSlot(k);
            keys[slot <= 5460 ? 0 : slot <= 10922 ? 1 : 2] = k;
        }
        Limit l = Limit.token(2, 1, Duration.ofMinutes(1));
        Set<Integer> nodes = new HashSet<>();
        for (String k : keys) {
            assertThat(rl.limit(k, l).remaining()).isEqualTo(1);
            assertThat(rl.async().limit(k, l).toCompletableFuture().join().allowed()).isTrue();
            assertThat(rl.reactive().limit(k, l).block(Duration.ofSeconds(30)).allowed()).isFalse();
            assertThat(rl.peek(k).orElseThrow().allowed()).isFalse();
            List<Integer> on = holders(k);
            assertThat(on).as("the key lives on exactly one node").hasSize(1);
            nodes.add(on.get(0));
        }
        assertThat(nodes).as("the three keys on three different nodes").hasSize(3);
    }

    @Test
    void allOrNothingOnKeysOfOneHashTag() {
        String tag = "{u" + System.nanoTime() + "}";
        String a = tag + ":a";
        String b = tag + ":b";
        List<Part> parts = List.of(Part.of(a, Limit.token(10, 10, Duration.ofMinutes(1))),
                Part.of(b, Limit.period(1, Duration.ofMinutes(1))));
        assertThat(rl.all(parts, Options.DEFAULT).allowed()).isTrue();
        AllDecision refused = rl.all(parts, Options.DEFAULT);
        assertThat(refused.allowed()).isFalse();
        assertThat(refused.index()).isEqualTo(1);
        assertThat(rl.peek(a).orElseThrow().remaining()).isEqualTo(8); // 9 left, less the peek's cost 1
        assertThat(holders(a)).isEqualTo(holders(b)).hasSize(1);
    }

    @Test
    void allOrNothingAcrossSlotsIsTheServersCrossSlotError() {
        String a = "cl:x:{a}" + System.nanoTime();
        String b = "cl:x:{b}" + System.nanoTime();
        assertThat(SlotHash.getSlot(a)).isNotEqualTo(SlotHash.getSlot(b));
        List<Part> parts = List.of(Part.of(a, Limit.period(5, Duration.ofMinutes(1))),
                Part.of(b, Limit.period(5, Duration.ofMinutes(1))));
        assertThatThrownBy(() -> rl.all(parts, Options.DEFAULT)).isInstanceOf(RateLimitException.class)
                .hasMessageStartingWith("CROSSSLOT");
        assertThat(holders(a)).isEmpty();
        assertThat(holders(b)).isEmpty();
    }

    @Test
    void waitOnTheServerOfTheKeysNode() {
        Scenarios.waitOnTheServer(rl, key("wait"));
    }

    @Test
    void aCallInFlightWhenItsNodeConnectionDropsIsNotReplayed() throws Exception {
        Scenarios.aCallInFlightIsNotReplayed(rl, key("replay"), ClusterTest::dropAllConnections);
    }

    @Test
    void overTheApplicationsClusterClientToo() throws Exception {
        RedisClusterClient app = RedisClusterClient.create(RedisURI.create(cluster.uris()[0]));
        // the application's client has not connected yet (ours starts from its seeds, their password)
        try (RateLimitClient c = RateLimitClient.of(app, Duration.ofSeconds(2));
                StatefulRedisClusterConnection<String, String> appConn = app.connect()) {
            Scenarios.aCallInFlightIsNotReplayed(c, key("replay"), ClusterTest::dropAllConnections);
            // the application's own connections keep Lettuce's reconnect (and its options)
            assertThat(app.getOptions().isAutoReconnect()).isTrue();
            assertThat(appConn.sync().set("cl:app", "1")).isEqualTo("OK");
            dropAllConnections();
            assertThat(appConn.sync().get("cl:app")).isEqualTo("1");
        }
        finally {
            app.shutdown();
        }
    }
}

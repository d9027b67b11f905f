package io.github.redisratelimit;

import org.junit.jupiter.api.Test;

import io.lettuce.core.KillArgs;
import io.lettuce.core.RedisClient;

/** A call in flight when its connection drops is not re-sent after the reconnect. */
class ReplayTest extends ServerTest {

    @Test
    void aCallInFlightWhenTheConnectionDropsFailsAndIsNotReplayed() throws Exception {
        Scenarios.aCallInFlightIsNotReplayed(rl, "replay:" + System.nanoTime(), () -> {
            RedisClient admin = RedisClient.create(server.uri());
            try (var c = admin.connect()) {
                c.sync().clientKill(KillArgs.Builder.typeNormal().skipme());
            }
            finally {
                admin.shutdown();
            }
        });
    }
}

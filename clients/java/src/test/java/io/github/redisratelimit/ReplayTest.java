package io.github.redisratelimit;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import io.lettuce.core.RedisClient;

/** A call in flight when its connection drops is not re-sent after the reconnect. */
class ReplayTest extends ServerTest {

    @Test
    void aCallInFlightWhenTheConnectionDropsFailsAndIsNotReplayed() throws Exception {
        String k = "replay:" + System.nanoTime();
        Limit l = Limit.period(1, Duration.ofSeconds(2));
        assertThat(rl.limit(k, l).allowed()).isTrue();
        // a waiting call (its own connection) is in flight; then every client connection is killed
        CompletableFuture<Decision> waiting = rl.async().limit(k, l, Options.DEFAULT.waitFor(Duration.ofSeconds(5)))
                .toCompletableFuture();
        Thread.sleep(300);
        RedisClient admin = RedisClient.create(server.uri());
        try (var c = admin.connect()) {
            c.sync().clientKill(io.lettuce.core.KillArgs.Builder.typeNormal().skipme());
        }
        finally {
            admin.shutdown();
        }
        Throwable failed = null;
        try {
            waiting.get(10, TimeUnit.SECONDS);
        }
        catch (java.util.concurrent.ExecutionException e) {
            failed = e.getCause();
        }
        assertThat(failed).as("the dropped call fails instead of being re-sent").isNotNull();
        // the window (2 s from the first call) ends; a replayed call would have taken it
        Thread.sleep(2500);
        assertThat(rl.limit(k, l, Options.cost(0)).remaining()).isEqualTo(1);
        // and the shared connection, dropped too, is opened again for the next call
        assertThat(rl.limit(k, l).allowed()).isTrue();
    }
}

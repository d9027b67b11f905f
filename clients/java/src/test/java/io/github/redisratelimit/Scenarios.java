package io.github.redisratelimit;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

/** Checks that run the same on a standalone server and on a cluster. */
final class Scenarios {

    private Scenarios() {
    }

    /** {@code WAIT}: the waiting call is admitted once the window ends, not before; a short wait times out. */
    static void waitOnTheServer(RateLimitClient rl, String k) {
        Limit l = Limit.period(1, Duration.ofMillis(300));
        long t0 = System.nanoTime();
        assertThat(rl.limit(k, l).allowed()).isTrue();
        Decision waited = rl.limit(k, l, Options.DEFAULT.waitFor(Duration.ofSeconds(5)));
        long tookMs = (System.nanoTime() - t0) / 1_000_000;
        assertThat(waited.allowed()).isTrue();
        assertThat(tookMs).isGreaterThanOrEqualTo(300); // not before the window ends
        Decision timedOut = rl.limit(k, Limit.period(1, Duration.ofMinutes(1)),
                Options.DEFAULT.waitFor(Duration.ofMillis(100)));
        assertThat(timedOut.allowed()).isFalse();
    }

    /**
     * A waiting call is in flight when {@code dropConnections} closes every client connection:
     * it fails, nothing is re-sent (the key's count stays at the one call before), and the
     * client goes on.
     */
    static void aCallInFlightIsNotReplayed(RateLimitClient c, String k, Runnable dropConnections) throws Exception {
        Limit l = Limit.period(1, Duration.ofSeconds(2));
        assertThat(c.limit(k, l).allowed()).isTrue();
        CompletableFuture<Decision> waiting = c.async().limit(k, l, Options.DEFAULT.waitFor(Duration.ofSeconds(5)))
                .toCompletableFuture();
        Thread.sleep(300);
        dropConnections.run();
        Throwable failed = null;
        try {
            waiting.get(10, TimeUnit.SECONDS);
        }
        catch (ExecutionException e) {
            failed = e.getCause();
        }
        assertThat(failed).as("the dropped call fails instead of being re-sent").isNotNull();
        // the window (2 s from the first call) ends; a re-sent call would have taken the next one
        Thread.sleep(2500);
        assertThat(c.limit(k, l, Options.cost(0)).remaining()).as("nothing counted after the drop").isEqualTo(1);
        // the connections dropped too are opened again for the next calls
        assertThat(c.limit(k, l).allowed()).isTrue();
        assertThat(c.limit(k, l).allowed()).isFalse();
    }
}

package io.github.redisratelimit.redisson;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ForkJoinPool;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.redisson.Redisson;
import org.redisson.api.RRateLimiter;
import org.redisson.api.RateType;
import org.redisson.api.RedissonClient;
import org.redisson.api.ratelimiter.RateLimiterArgs;
import org.redisson.config.Config;

import io.github.redisratelimit.RateLimitClient;
import io.github.redisratelimit.RedisServer;

/** The Redisson drop-in on a real server: its keys, exact counts under threads, its errors. */
class RedissonDropInTest {

    static RedisServer server;
    static RedissonClient redisson;

    @BeforeAll
    static void start() {
        server = RedisServer.start();
        Config config = new Config();
        config.useSingleServer().setAddress(server.uri());
        redisson = RedissonRateLimiters.wrap(Redisson.create(config));
    }

    @AfterAll
    static void stop() {
        redisson.shutdown();
        server.close();
    }

    static String name(String n) {
        return n + System.nanoTime();
    }

    @Test
    void trySetRateCreatesOneKeyAndTheDecisionsAreTheModules() {
        String n = name("keys");
        RRateLimiter l = redisson.getRateLimiter(n);
        assertThat(l.trySetRate(RateType.OVERALL, 2, Duration.ofMinutes(1))).isTrue();
        assertThat(l.trySetRate(RateType.OVERALL, 5, Duration.ofMinutes(1))).isFalse();
        assertThat(redisson.getKeys().countExists(n, "{" + n + "}:rl")).isEqualTo(1);
        assertThat(l.tryAcquire()).isTrue();
        assertThat(l.tryAcquire()).isTrue();
        assertThat(l.tryAcquire()).isFalse();
        try (RateLimitClient rl = RateLimitClient.create(server.uri())) {
            assertThat(rl.info("{" + n + "}:rl").orElseThrow()).containsEntry("algorithm", "slide")
                    .containsEntry("limit", 2L).containsEntry("window_ms", 60_000L);
        }
        assertThat(l.delete()).isTrue();
        assertThat(redisson.getKeys().countExists(n, "{" + n + "}:rl")).isZero();
        assertThat(l.delete()).isFalse();
    }

    @Test
    void aHundredThreadsOnOneHotKeyNeverOverAdmit() throws Exception {
        RRateLimiter l = redisson.getRateLimiter(name("hot"));
        l.trySetRate(RateType.OVERALL, 250, Duration.ofMinutes(1));
        ExecutorService pool = Executors.newFixedThreadPool(100);
        List<Callable<Integer>> tasks = new ArrayList<>();
        for (int t = 0; t < 100; t++) {
            tasks.add(() -> {
                int n = 0;
                for (int i = 0; i < 5; i++) {
                    n += l.tryAcquire() ? 1 : 0;
                }
                return n;
            });
        }
        int admitted = 0;
        for (Future<Integer> f : pool.invokeAll(tasks)) {
            admitted += f.get();
        }
        pool.shutdown();
        assertThat(admitted).isEqualTo(250);
        assertThat(l.availablePermits()).isZero();
    }

    @Test
    void redissonsErrorsAndArgumentChecks() {
        RRateLimiter l = redisson.getRateLimiter(name("errors"));
        assertThatThrownBy(l::tryAcquire).hasMessageContaining("RateLimiter is not initialized");
        l.trySetRate(RateType.PER_CLIENT, 1, Duration.ofSeconds(1));
        assertThatThrownBy(() -> l.tryAcquire(2)).hasMessageContaining(
                "Requested permits amount cannot exceed defined rate");
        assertThatThrownBy(() -> l.release(-1)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> l.updateRate(RateLimiterArgs.of(RateType.OVERALL, 1, Duration.ofSeconds(5))
                .keepAliveTime(Duration.ofSeconds(1)))).isInstanceOf(IllegalArgumentException.class);
        assertThat(l.updateRate(RateLimiterArgs.of(RateType.OVERALL, 3, Duration.ofSeconds(5)))).isTrue();
        assertThat(l.getConfig().getRate()).isEqualTo(3);
        assertThatThrownBy(l::dump).isInstanceOf(UnsupportedOperationException.class);
    }

    @Test
    void aWaiterIsAdmittedAtThePermitsExpiryPlusTheSlackWhenItsTimeoutCoversIt() throws Exception {
        RRateLimiter l = redisson.getRateLimiter(name("wait"));
        l.trySetRate(RateType.OVERALL, 1, Duration.ofMillis(400));
        long t0 = System.nanoTime();
        assertThat(l.tryAcquireAsync().get(5, TimeUnit.SECONDS)).isTrue();
        // the timeout covers the permit's expiry + the slack (+1: the server's clock is in ms)
        assertThat(l.tryAcquire(1, Duration.ofMillis(400 + ModuleRateLimiter.WAIT_SLACK_MS + 1))).isTrue();
        assertThat(msSince(t0)).isGreaterThanOrEqualTo(400 + ModuleRateLimiter.WAIT_SLACK_MS - 1);
        // a timeout short of it: refused once the timeout has run out, as stock (not before)
        long t1 = System.nanoTime();
        assertThat(l.tryAcquire(1, Duration.ofMillis(150))).isFalse();
        assertThat(msSince(t1)).isGreaterThanOrEqualTo(150);
        assertThat(l.tryAcquire(1, Duration.ZERO)).isFalse();
    }

    @Test
    void aWaiterSleepsThroughTheSlackAndTriesAgainWhileItsTimeoutCoversIt() throws Exception {
        // a slack of 300 ms makes the instants far apart: the permit frees at +300 ms, the waiter
        // tries again at +600 ms; a call in between takes the freed permit, and the waiter, refused
        // once more, tries again at that permit's expiry + the slack (its timeout covers it)
        try (RateLimitClient module = RateLimitClient.create(server.uri());
                var lettuce = new Lettuce(server.uri())) {
            RRateLimiter l = ModuleRateLimiter.proxy(new ModuleRateLimiter(name("slack"), "c", module,
                    new PlainCommands(lettuce.connection.async()), ForkJoinPool.commonPool(),
                    ModuleRateLimiter.Delay.on(ForkJoinPool.commonPool()), 300));
            l.trySetRate(RateType.OVERALL, 1, Duration.ofMillis(300));
            long t0 = System.nanoTime();
            assertThat(l.tryAcquire()).isTrue();
            var waiter = l.tryAcquireAsync(1, Duration.ofSeconds(3)).toCompletableFuture();
            Thread.sleep(400);
            assertThat(waiter).isNotDone();
            assertThat(l.tryAcquire()).as("the freed permit, the waiter still sleeping").isTrue();
            assertThat(waiter.get(5, TimeUnit.SECONDS)).isTrue();
            assertThat(msSince(t0)).as("the second permit's expiry + the slack").isGreaterThanOrEqualTo(400 + 300 + 300 - 1);
        }
    }

    static long msSince(long t0) {
        return (System.nanoTime() - t0) / 1_000_000;
    }

    /** A plain Lettuce connection (the drop-in's {@code GET}/{@code SET} side). */
    static final class Lettuce implements AutoCloseable {
        final io.lettuce.core.RedisClient client;
        final io.lettuce.core.api.StatefulRedisConnection<String, String> connection;

        Lettuce(String uri) {
            client = io.lettuce.core.RedisClient.create(uri);
            connection = client.connect();
        }

        @Override
        public void close() {
            connection.close();
            client.shutdown();
        }
    }

    @Test
    void asyncCallsHoldNoThreadWhileTheyWait() throws Exception {
        RRateLimiter l = redisson.getRateLimiter(name("async"));
        l.trySetRate(RateType.OVERALL, 1, Duration.ofMinutes(1));
        assertThat(l.tryAcquire()).isTrue();
        // more waiting calls than the common pool has threads (it ran the *Async forms before)
        List<java.util.concurrent.CompletableFuture<Boolean>> waiting = new ArrayList<>();
        for (int i = 0; i < ForkJoinPool.getCommonPoolParallelism() + 2; i++) {
            waiting.add(l.tryAcquireAsync(1, Duration.ofSeconds(5)).toCompletableFuture());
        }
        assertThat(l.availablePermitsAsync().get(10, TimeUnit.SECONDS)).isZero();
        assertThat(l.getConfigAsync().get(10, TimeUnit.SECONDS).getRate()).isEqualTo(1);
        // no thread blocks for a waiting call (Lettuce's computation threads may open their
        // connections: a moment each) while every one still waits
        List<String> busy = threadsInTheDropIn();
        for (long end = System.nanoTime() + 2_000_000_000L; !busy.isEmpty() && System.nanoTime() < end;) {
            Thread.sleep(20);
            busy = threadsInTheDropIn();
        }
        assertThat(busy).as("threads in the drop-in while the calls wait").isEmpty();
        assertThat(waiting).as("every waiting call still waits").noneMatch(f -> f.isDone());
        for (var f : waiting) {
            assertThat(f.get(10, TimeUnit.SECONDS)).isFalse();
        }
        // errors come back through the future, as Redisson's
        assertThatThrownBy(() -> redisson.getRateLimiter(name("none")).tryAcquireAsync().get(5, TimeUnit.SECONDS))
                .isInstanceOf(java.util.concurrent.ExecutionException.class).cause()
                .hasMessage("RateLimiter is not initialized");
        assertThatThrownBy(() -> l.tryAcquireAsync(2).get(5, TimeUnit.SECONDS)).cause()
                .hasMessage(ModuleRateLimiter.EXCEEDS);
        assertThatThrownBy(() -> l.tryAcquire(2)).hasMessage(ModuleRateLimiter.EXCEEDS);
    }

    /** The threads (but this one) with a frame of the package on their stack. */
    static List<String> threadsInTheDropIn() {
        List<String> in = new ArrayList<>();
        Thread.getAllStackTraces().forEach((t, frames) -> {
            if (t != Thread.currentThread() && java.util.Arrays.stream(frames)
                    .anyMatch(f -> f.getClassName().startsWith("io.github.redisratelimit."))) {
                in.add(t.getName());
            }
        });
        return in;
    }
}

package io.github.redisratelimit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.Test;

class ClientTest extends ServerTest {


    static String key(String name) {
        return "java:" + name + ":" + System.nanoTime();
    }

    @Test
    void tokenBucketAdmitsTheBurstThenRefusesWithTheExactWait() {
        String k = key("token");
        Limit l = Limit.token(3, 1, Duration.ofMinutes(1));
        for (int i = 2; i >= 0; i--) {
            Decision d = rl.limit(k, l);
            assertThat(d.allowed()).isTrue();
            assertThat(d.remaining()).isEqualTo(i);
            assertThat(d.limit()).isEqualTo(3);
        }
        Decision refused = rl.limit(k, l);
        assertThat(refused.allowed()).isFalse();
        assertThat(refused.retryAfterMs()).isBetween(1L, 60_000L);
        assertThat(refused.headers()).containsEntry("RateLimit-Policy", "\"default\";q=3")
                .containsKey("Retry-After");
        assertThat(refused.rateLimitHeader()).startsWith("\"default\";r=0;t=");
    }

    @Test
    void theExactInstantOfRetryAfterIsAdmittedAndOneMsEarlierIsNot() {
        String k = key("at");
        Limit l = Limit.period(2, Duration.ofSeconds(10));
        long t0 = 4_000_000_000_000L;
        assertThat(rl.limit(k, l, Options.DEFAULT.at(t0)).allowed()).isTrue();
        assertThat(rl.limit(k, l, Options.DEFAULT.at(t0)).allowed()).isTrue();
        Decision refused = rl.limit(k, l, Options.DEFAULT.at(t0));
        assertThat(refused.retryAfterMs()).isEqualTo(10_000);
        assertThat(rl.limit(k, l, Options.DEFAULT.at(t0 + 9_999)).allowed()).isFalse();
        assertThat(rl.limit(k, l, Options.DEFAULT.at(t0 + 10_000)).allowed()).isTrue();
    }

    @Test
    void everyAlgorithmAndItsOptions() {
        assertThat(rl.limit(key("p"), Limit.period(5, Duration.ofDays(1)).align(Duration.ofHours(8))).remaining())
                .isEqualTo(4);
        assertThat(rl.limit(key("s"), Limit.slide(100, Duration.ofMinutes(1)).buckets(60).anchor().floor())
                .remaining()).isEqualTo(99);
        Decision leaky = rl.limit(key("l"), Limit.leaky(20, 10, Duration.ofSeconds(1)).nodelay());
        assertThat(leaky.allowed()).isTrue();
        assertThat(rl.limit(key("t"), Limit.token(10, 10, Duration.ofSeconds(1)).step(), Options.cost(4)).remaining())
                .isEqualTo(6);
        Decision most = rl.limit(key("m"), Limit.token(10, 10, Duration.ofSeconds(1)), Options.DEFAULT.atMost(25));
        assertThat(most.taken()).isEqualTo(10);
        Decision cell = rl.throttle(key("c"), 15, 30, 60, 1);
        assertThat(cell).isEqualTo(new Decision(true, 16, 15, 0, 2000));
        String dry = key("d");
        rl.limit(dry, Limit.token(5, 1, Duration.ofSeconds(1)), Options.DEFAULT.dryRun());
        assertThat(rl.peek(dry)).isEmpty();
    }

    @Test
    void refundChargePeekInfo() {
        String k = key("rc");
        Limit l = Limit.token(10, 1, Duration.ofSeconds(10));
        rl.limit(k, l, Options.cost(6));
        // the reply is a dry run of cost 1 after the refund: 10 - 6 + 2 - 1
        assertThat(rl.refund(k, 2).orElseThrow().remaining()).isEqualTo(5);
        assertThat(rl.charge(k, 10).orElseThrow().allowed()).isFalse();
        Map<String, Object> info = rl.info(k).orElseThrow();
        assertThat(info).containsEntry("algorithm", "token").containsEntry("capacity", 10L);
        assertThat(rl.peek(k).orElseThrow().allowed()).isFalse();
        assertThat(rl.refund(key("missing"), 1)).isEmpty();
        assertThat(rl.info(key("missing"))).isEmpty();
        assertThat(rl.charge(key("missing"), 1)).isEmpty();
    }

    @Test
    void allOrNothing() {
        String a = key("a");
        String b = key("b");
        List<Part> parts = List.of(Part.of(a, Limit.token(10, 10, Duration.ofMinutes(1))),
                Part.of(b, Limit.period(1, Duration.ofMinutes(1))));
        assertThat(rl.all(parts, Options.DEFAULT).allowed()).isTrue();
        AllDecision refused = rl.all(parts, Options.DEFAULT);
        assertThat(refused.allowed()).isFalse();
        assertThat(refused.index()).isEqualTo(1); // 0-based: the second limit
        assertThat(refused.details()).hasSize(2);
        assertThat(rl.peek(a).orElseThrow().remaining()).isEqualTo(8); // 9 left, less the peek's cost 1
    }

    @Test
    void leases() {
        String k = key("lease");
        Lease one = rl.acquire(k, 1, Duration.ofMinutes(1), null, Options.DEFAULT);
        assertThat(one.acquired()).isTrue();
        assertThat(one.id()).isNotBlank();
        Lease two = rl.acquire(k, 1, Duration.ofMinutes(1), null, Options.DEFAULT);
        assertThat(two.acquired()).isFalse();
        assertThat(two.id()).isNull();
        assertThat(rl.release(k, one.id())).isTrue();
        assertThat(rl.release(k, one.id())).isFalse();
    }

    @Test
    void policiesAndTop() {
        String name = "java-" + System.nanoTime();
        assertThat(rl.policySet(name, Limit.token(1, 1, Duration.ofMinutes(1)), false)).isTrue();
        String k = key("hit");
        assertThat(rl.hit(name, k, Options.DEFAULT).allowed()).isTrue();
        assertThat(rl.limit(k, Limit.policy(name)).allowed()).isFalse();
        assertThat(rl.top(5, name)).extracting(TopEntry::key).contains(k);
        assertThat(rl.policyGet(name)).isNotNull();
        assertThat(rl.policyDel(name)).isTrue();
        assertThatThrownBy(() -> rl.hit(name, k, Options.DEFAULT)).isInstanceOf(RateLimitException.class)
                .hasMessageContaining("no such policy");
    }

    @Test
    void serverErrorsKeepTheirMessageAndCode() {
        assertThatThrownBy(() -> rl.limit(key("e"), Limit.token(0, 1, Duration.ofSeconds(1))))
                .isInstanceOf(RateLimitException.class)
                .hasMessage("ERR capacity must be an integer between 1 and 1000000000000")
                .satisfies(e -> assertThat(((RateLimitException) e).code()).isEqualTo("ERR"));
        String k = key("wrongtype");
        rl.limit(k, Limit.token(5, 1, Duration.ofSeconds(1)));
        assertThatThrownBy(() -> rl.limit(k, Limit.slide(5, Duration.ofSeconds(1))))
                .isInstanceOf(RateLimitException.class).hasMessageStartingWith("WRONGTYPE");
        assertThatThrownBy(() -> Limit.token(1, 1, Duration.ZERO)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> Limit.slide(1, Duration.ofSeconds(1)).step())
                .isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> Options.cost(-1)).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void waitOnTheServerAdmitsInArrivalOrderAndTheClientWaitsForIt() {
        Scenarios.waitOnTheServer(rl, key("wait"));
    }

    @Test
    void asyncAndReactiveFormsGiveTheSameDecisions() throws Exception {
        String k = key("forms");
        Limit l = Limit.token(2, 1, Duration.ofMinutes(1));
        Decision a = rl.async().limit(k, l).toCompletableFuture().get();
        Decision r = rl.reactive().limit(k, l).block(Duration.ofSeconds(30));
        Decision s = rl.limit(k, l);
        assertThat(List.of(a.allowed(), r.allowed(), s.allowed())).containsExactly(true, true, false);
        assertThat(rl.reactive().peek(key("none")).block(Duration.ofSeconds(30))).isEmpty();
    }

    @Test
    void exactCountsUnderThreads() throws Exception {
        String k = key("threads");
        Limit l = Limit.period(500, Duration.ofMinutes(1));
        AtomicInteger admitted = new AtomicInteger();
        ExecutorService pool = Executors.newFixedThreadPool(32);
        List<CompletableFuture<?>> fs = new ArrayList<>();
        for (int i = 0; i < 1000; i++) {
            fs.add(CompletableFuture.runAsync(() -> {
                if (rl.limit(k, l).allowed()) {
                    admitted.incrementAndGet();
                }
            }, pool));
        }
        CompletableFuture.allOf(fs.toArray(CompletableFuture[]::new)).get();
        pool.shutdown();
        assertThat(admitted.get()).isEqualTo(500);
    }

    @Test
    void aPausedServerTimesOutAndTheLateCallCountsNothing() throws Exception {
        try (RedisServer own = RedisServer.start();
                RateLimitClient c = new RateLimitClient(
                        LettuceTransport.of(io.lettuce.core.RedisClient.create(own.uri()), true),
                        Duration.ofMillis(200))) {
            String k = key("paused");
            Limit l = Limit.period(10, Duration.ofMinutes(1));
            assertThat(c.limit(k, l).remaining()).isEqualTo(9);
            own.pause();
            try {
                assertThatThrownBy(() -> c.limit(k, l)).isInstanceOf(DeadlineExceededException.class);
                Thread.sleep(300);
            }
            finally {
                own.resume();
            }
            // the call the paused server ran late was refused by its DEADLINE: 9 left, and a
            // peek (a dry run of cost 1) answers 8
            Thread.sleep(100);
            assertThat(c.peek(k).orElseThrow().remaining()).isEqualTo(8);
        }
    }
}

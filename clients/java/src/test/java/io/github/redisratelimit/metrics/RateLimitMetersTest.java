package io.github.redisratelimit.metrics;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;

import org.junit.jupiter.api.Test;

import io.github.redisratelimit.Limit;
import io.github.redisratelimit.ServerTest;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;

/** The meters read a real server's INFO ratelimit. */
class RateLimitMetersTest extends ServerTest {

    @Test
    void decisionsCallsAndUp() {
        RedisClient c = RedisClient.create(server.uri());
        try (StatefulRedisConnection<String, String> conn = c.connect()) {
            SimpleMeterRegistry registry = new SimpleMeterRegistry();
            RateLimitMeters meters = new RateLimitMeters(() -> conn.sync().info("ratelimit"), 0);
            meters.bindTo(registry);
            String k = "meters:" + System.nanoTime();
            Limit l = Limit.period(2, Duration.ofMinutes(1));
            double before = registry.get("ratelimit.decisions").tag("command", "period").tag("outcome", "limited")
                    .functionCounter().count();
            for (int i = 0; i < 3; i++) {
                rl.limit(k, l);
            }
            assertThat(registry.get("ratelimit.decisions").tag("command", "period").tag("outcome", "limited")
                    .functionCounter().count()).isEqualTo(before + 1);
            assertThat(registry.get("ratelimit.calls").tag("command", "period").functionCounter().count())
                    .isGreaterThanOrEqualTo(3);
            assertThat(registry.get("ratelimit.up").gauge().value()).isEqualTo(1);
            assertThat(registry.find("ratelimit.decisions").tag("command", "peek").functionCounter()).isNull();
            assertThat(meters).isNotNull();
        }
        finally {
            c.shutdown();
        }
    }

    @Test
    void eachPolicyHasItsDecisionsAndACandidatesBesideIt() {
        String text = String.join("\r\n", "# Ratelimit", "ratelimit_hit_calls:3",
                "ratelimit_policy_stats_api:calls=3,admitted=2,limited=1,shadow_limited=0,near_limit=1,overrides=0",
                "ratelimit_policy_stats_a:b:calls=1,admitted=1,limited=0,shadow_limited=0,near_limit=0,overrides=0,"
                        + "candidate_calls=1,candidate_admitted=0,candidate_limited=1,candidate_near_limit=0");
        String[] info = { "ratelimit_hit_calls:0" };
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        RateLimitMeters meters = new RateLimitMeters(() -> info[0], 0);
        meters.bindTo(registry);
        assertThat(registry.find("ratelimit.policy.decisions").meters()).isEmpty();
        info[0] = text; // policies defined after binding: their meters come with the next read
        assertThat(registry.get("ratelimit.up").gauge().value()).isEqualTo(1);
        assertThat(registry.get("ratelimit.policy.decisions").tag("policy", "api").tag("outcome", "admitted")
                .functionCounter().count()).isEqualTo(2);
        assertThat(registry.get("ratelimit.policy.decisions").tag("policy", "api").tag("outcome", "near_limit")
                .functionCounter().count()).isEqualTo(1);
        assertThat(registry.get("ratelimit.policy.candidate.decisions").tag("policy", "a:b").tag("outcome", "limited")
                .functionCounter().count()).isEqualTo(1);
        assertThat(registry.find("ratelimit.policy.candidate.decisions").tag("policy", "api").functionCounter())
                .isNull();
        assertThat(registry.find("ratelimit.policy.decisions").meters()).hasSize(8);
    }

    @Test
    void aFailedReadIsNotUp() {
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        RateLimitMeters meters = new RateLimitMeters(() -> {
            throw new IllegalStateException("down");
        }, 0);
        meters.bindTo(registry);
        assertThat(registry.get("ratelimit.up").gauge().value()).isZero();
        assertThat(registry.get("ratelimit.calls").tag("command", "token").functionCounter().count()).isZero();
        assertThat(meters).isNotNull();
    }
}

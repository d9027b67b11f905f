package io.github.redisratelimit.scg;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.cloud.gateway.filter.ratelimit.KeyResolver;
import org.springframework.cloud.gateway.filter.ratelimit.RedisRateLimiter;
import org.springframework.context.annotation.Bean;
import org.springframework.http.HttpStatus;
import org.springframework.web.reactive.function.client.WebClient;
import org.springframework.web.reactive.function.server.RouterFunction;
import org.springframework.web.reactive.function.server.RouterFunctions;
import org.springframework.web.reactive.function.server.ServerResponse;

import io.github.redisratelimit.Limit;
import io.github.redisratelimit.RateLimitClient;
import io.github.redisratelimit.SpringServerTest;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * A real gateway (Spring Cloud Gateway on Netty, routes from properties) with only this jar
 * added: the module decides, with the stock route arguments and headers.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT, properties = {
        "spring.cloud.gateway.server.webflux.routes[0].id=burst",
        "spring.cloud.gateway.server.webflux.routes[0].uri=forward:/hello",
        "spring.cloud.gateway.server.webflux.routes[0].predicates[0]=Path=/burst",
        "spring.cloud.gateway.server.webflux.routes[0].filters[0].name=RequestRateLimiter",
        "spring.cloud.gateway.server.webflux.routes[0].filters[0].args.redis-rate-limiter.replenishRate=1",
        "spring.cloud.gateway.server.webflux.routes[0].filters[0].args.redis-rate-limiter.burstCapacity=5",
        "spring.cloud.gateway.server.webflux.routes[0].filters[0].args.redis-rate-limiter.requestedTokens=1",
        "spring.cloud.gateway.server.webflux.routes[1].id=daily",
        "spring.cloud.gateway.server.webflux.routes[1].uri=forward:/hello",
        "spring.cloud.gateway.server.webflux.routes[1].predicates[0]=Path=/daily",
        "spring.cloud.gateway.server.webflux.routes[1].filters[0].name=RequestRateLimiter",
        "spring.cloud.gateway.server.webflux.routes[1].filters[0].args.redis-rate-limiter.replenishRate=1",
        "spring.cloud.gateway.server.webflux.routes[1].filters[0].args.redis-rate-limiter.burstCapacity=1",
        "redis-ratelimit.gateway.routes.daily.algorithm=period",
        "redis-ratelimit.gateway.routes.daily.limit=3",
        "redis-ratelimit.gateway.routes.daily.window=1d",
        "redis-ratelimit.gateway.timeout=2s" })
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class GatewayTest extends SpringServerTest {


    @SpringBootApplication
    static class App {

        @Bean
        RouterFunction<ServerResponse> hello() {
            return RouterFunctions.route().GET("/hello", req -> ServerResponse.ok().bodyValue("ok")).build();
        }

        @Bean
        KeyResolver user() {
            return exchange -> Mono.justOrEmpty(exchange.getRequest().getHeaders().getFirst("X-User"));
        }
    }

    @Autowired
    RedisRateLimiter limiter;

    @LocalServerPort
    int port;

    record Reply(int status, Map<String, String> headers) {
    }

    Reply get(String path, String user) {
        return WebClient.create("http://127.0.0.1:" + port).get().uri(path).header("X-User", user)
                .exchangeToMono(r -> r.releaseBody().thenReturn(new Reply(r.statusCode().value(),
                        r.headers().asHttpHeaders().toSingleValueMap())))
                .block(Duration.ofSeconds(10));
    }

    @Test
    @Order(1)
    void addingTheJarSwitchesTheBean() {
        assertThat(limiter).isInstanceOf(ModuleRedisRateLimiter.class);
    }

    @Test
    @Order(2)
    void exactCountsUnderConcurrencyAndTheHeadersOn200And429() {
        String user = "u" + System.nanoTime();
        long t0 = System.currentTimeMillis();
        List<Reply> replies = Flux.range(0, 40).flatMap(i -> Mono.fromCallable(() -> get("/burst", user))
                .subscribeOn(reactor.core.scheduler.Schedulers.boundedElastic()), 40).collectList()
                .block(Duration.ofSeconds(30));
        List<Reply> ok = new ArrayList<>();
        AtomicInteger refused = new AtomicInteger();
        for (Reply r : replies) {
            if (r.status() == 200) {
                // decided by the module, not let through after a timeout (remaining -1)
                assertThat(r.headers().get("X-RateLimit-Remaining")).isNotEqualTo("-1");
                ok.add(r);
            }
            else {
                assertThat(r.status()).isEqualTo(HttpStatus.TOO_MANY_REQUESTS.value());
                assertThat(r.headers()).containsEntry("X-RateLimit-Remaining", "0")
                        .containsEntry("X-RateLimit-Burst-Capacity", "5").containsKey("Retry-After");
                refused.incrementAndGet();
            }
        }
        // the burst, and one token per second since the first request (STEP)
        long seconds = (System.currentTimeMillis() - t0) / 1000;
        assertThat(ok.size()).isBetween(5, 5 + (int) seconds + 1);
        assertThat(refused.get()).isEqualTo(40 - ok.size());
        assertThat(ok.get(0).headers()).containsEntry("X-RateLimit-Replenish-Rate", "1")
                .containsEntry("X-RateLimit-Requested-Tokens", "1").containsKey("RateLimit")
                .containsEntry("RateLimit-Policy", "\"default\";q=5");
        // one module key per route and caller, no stock keys
        try (RateLimitClient rl = RateLimitClient.create(SERVER.uri())) {
            assertThat(rl.info(ModuleRedisRateLimiter.key("burst", user)).orElseThrow())
                    .containsEntry("algorithm", "token").containsEntry("capacity", 5L);
        }
    }

    /** The calls of one command counted by INFO commandstats (0 when never called; a module's
     * commands are listed as registered, in capitals). */
    static long calls(String info, String command) {
        return info.lines().filter(l -> l.toLowerCase(java.util.Locale.ROOT).startsWith("cmdstat_" + command + ":")).findFirst()
                .map(l -> Long.parseLong(l.substring(l.indexOf("calls=") + 6, l.indexOf(',', l.indexOf("calls="))))).orElse(0L);
    }

    @Test
    @Order(2)
    void eachRequestIsOneModuleCommandAndNoScriptRuns() {
        io.lettuce.core.RedisClient client = io.lettuce.core.RedisClient.create(SERVER.uri());
        try (var connection = client.connect()) {
            String before = connection.sync().info("commandstats");
            String user = "one" + System.nanoTime();
            for (int i = 0; i < 7; i++) {
                get("/burst", user);
            }
            String after = connection.sync().info("commandstats");
            assertThat(calls(after, "rl.token") - calls(before, "rl.token")).isEqualTo(7);
            for (String script : List.of("eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "script|load")) {
                assertThat(calls(after, script)).as(script).isZero();
            }
        }
        finally {
            client.shutdown();
        }
    }

    @Test
    @Order(3)
    void aDailyQuotaFromTheProperties() {
        String user = "d" + System.nanoTime();
        for (int i = 0; i < 3; i++) {
            Reply r = get("/daily", user);
            assertThat(r.status()).isEqualTo(200);
            assertThat(r.headers()).containsEntry("RateLimit-Policy", "\"default\";q=3;w=86400");
        }
        Reply refused = get("/daily", user);
        assertThat(refused.status()).isEqualTo(429);
        assertThat(Long.parseLong(refused.headers().get("Retry-After"))).isBetween(86_000L, 86_400L);
        assertThat(new GatewayRateLimitProperties.RouteLimit().toLimit().kind())
                .isEqualTo(Limit.Kind.PERIOD);
    }

    @Test
    @Order(4)
    void aPausedRedisLetsRequestsThroughWithinTheTimeout() throws Exception {
        String user = "p" + System.nanoTime();
        SERVER.pause();
        try {
            long t0 = System.nanoTime();
            Reply r = get("/burst", user);
            long ms = (System.nanoTime() - t0) / 1_000_000;
            assertThat(r.status()).isEqualTo(200);
            assertThat(r.headers()).containsEntry("X-RateLimit-Remaining", "-1");
            assertThat(ms).isBetween(2_000L, 8_000L); // the 2 s timeout, then let through
        }
        finally {
            SERVER.resume();
        }
        // the late call, run by the resumed server past its DEADLINE, counted nothing
        Thread.sleep(200);
        assertThat(get("/burst", user).headers()).containsEntry("X-RateLimit-Remaining", "4");
    }
}

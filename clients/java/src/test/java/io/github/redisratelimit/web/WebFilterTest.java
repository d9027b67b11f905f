package io.github.redisratelimit.web;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Test;
import org.springframework.test.web.reactive.server.WebTestClient;
import org.springframework.web.reactive.function.server.RouterFunctions;
import org.springframework.web.reactive.function.server.ServerResponse;

import io.github.redisratelimit.Limit;
import io.github.redisratelimit.RateLimitClient;
import io.github.redisratelimit.RedisServer;
import io.github.redisratelimit.ServerTest;
import io.lettuce.core.RedisClient;

/** The WebFlux filter on a real server, and the shared key layout. */
class WebFilterTest extends ServerTest {


    @Test
    void everyAddressOfTheSharedKeyLayout() throws IOException {
        String json = Files.readString(Path.of("../key-layout.json"));
        Matcher m = Pattern.compile("\\[\"([^\"]+)\", \"([^\"]+)\"\\]").matcher(json);
        int n = 0;
        while (m.find()) {
            assertThat(ClientAddress.tenant(m.group(1))).as(m.group(1)).isEqualTo(m.group(2));
            n++;
        }
        assertThat(n).isGreaterThanOrEqualTo(13);
        assertThat(json).contains("\"prefix\": \"" + RateLimitWebFilter.DEFAULT_PREFIX + "\"");
    }

    WebTestClient client(RateLimitWebFilter filter) {
        return WebTestClient.bindToRouterFunction(RouterFunctions.route().GET("/", r -> ServerResponse.ok()
                .bodyValue("ok")).build()).webFilter(filter).build();
    }

    @Test
    void headersOn200And429ThenRetryAfter() {
        String user = "w" + System.nanoTime();
        RateLimitWebFilter f = RateLimitWebFilter.builder(rl, Limit.period(2, Duration.ofMinutes(1)))
                .key(e -> e.getRequest().getHeaders().getFirst("X-User")).build();
        WebTestClient c = client(f);
        for (int i = 1; i >= 0; i--) {
            c.get().uri("/").header("X-User", user).exchange().expectStatus().isOk().expectHeader()
                    .valueEquals("RateLimit-Policy", "\"default\";q=2;w=60").expectHeader()
                    .valueMatches("RateLimit", "\"default\";r=" + i + ";t=\\d+");
        }
        c.get().uri("/").header("X-User", user).exchange().expectStatus().isEqualTo(429).expectHeader()
                .valueMatches("Retry-After", "\\d+");
        assertThat(rl.peek("ratelimit:" + user)).isPresent();
        // no tenant: not limited
        c.get().uri("/").exchange().expectStatus().isOk();
    }

    @Test
    void aPausedServerFailsOpenOrClosedWithinTheTimeout() throws Exception {
        try (RedisServer own = RedisServer.start();
                RateLimitClient c = RateLimitClient.of(RedisClient.create(own.uri()), Duration.ofMillis(300))) {
            Limit l = Limit.token(5, 1, Duration.ofSeconds(1));
            c.limit("warm", l);
            own.pause();
            try {
                client(RateLimitWebFilter.builder(c, l).key(e -> "t").build()).get().uri("/").exchange()
                        .expectStatus().isOk();
                client(RateLimitWebFilter.builder(c, l).key(e -> "t").failOpen(false).build()).get().uri("/")
                        .exchange().expectStatus().isEqualTo(503);
            }
            finally {
                own.resume();
            }
        }
    }
}

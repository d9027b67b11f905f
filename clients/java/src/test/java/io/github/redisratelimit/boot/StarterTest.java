package io.github.redisratelimit.boot;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;

import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.context.annotation.Bean;
import org.springframework.web.reactive.function.client.WebClient;
import org.springframework.web.reactive.function.server.RouterFunction;
import org.springframework.web.reactive.function.server.RouterFunctions;
import org.springframework.web.reactive.function.server.ServerResponse;

import io.github.redisratelimit.RateLimitClient;
import io.github.redisratelimit.SpringServerTest;
import io.github.redisratelimit.web.RateLimitWebFilter;

/** The starter in a WebFlux application: the client bean and the filter from properties. */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT, properties = {
        "redis-ratelimit.web.enabled=true", "redis-ratelimit.web.algorithm=period",
        "redis-ratelimit.web.limit=3", "redis-ratelimit.web.window=1h",
        "redis-ratelimit.web.prefix=starter-${random.uuid}:" })
class StarterTest extends SpringServerTest {
    /** A request that never answers fails the test instead of hanging it. */
    private static final Duration TIMEOUT = Duration.ofSeconds(30);

    @SpringBootApplication
    static class App {

        @Bean
        RouterFunction<ServerResponse> hello() {
            return RouterFunctions.route().GET("/", req -> ServerResponse.ok().bodyValue("ok")).build();
        }
    }

    @Autowired
    RateLimitClient client;

    @Autowired
    RateLimitWebFilter filter;

    @LocalServerPort
    int port;

    int status() {
        return WebClient.create("http://127.0.0.1:" + port).get().uri("/")
                .exchangeToMono(r -> r.releaseBody().thenReturn(r.statusCode().value())).block(TIMEOUT);
    }

    @Test
    void theFilterLimitsEachClientAddress() {
        assertThat(client).isNotNull();
        assertThat(filter).isNotNull();
        assertThat(status()).isEqualTo(200);
        assertThat(status()).isEqualTo(200);
        assertThat(status()).isEqualTo(200);
        assertThat(status()).isEqualTo(429);
    }
}

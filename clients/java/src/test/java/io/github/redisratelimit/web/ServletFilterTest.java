package io.github.redisratelimit.web;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;

import org.junit.jupiter.api.Test;
import org.springframework.mock.web.MockFilterChain;
import org.springframework.mock.web.MockHttpServletRequest;
import org.springframework.mock.web.MockHttpServletResponse;

import io.github.redisratelimit.Limit;
import io.github.redisratelimit.RateLimitClient;
import io.github.redisratelimit.RedisServer;
import io.github.redisratelimit.ServerTest;

/** The servlet filter on a real server (Spring's mock request and response). */
class ServletFilterTest extends ServerTest {


    MockHttpServletResponse call(RateLimitServletFilter f, String address) throws Exception {
        MockHttpServletRequest req = new MockHttpServletRequest("GET", "/");
        req.setRemoteAddr(address);
        MockHttpServletResponse res = new MockHttpServletResponse();
        MockFilterChain chain = new MockFilterChain();
        f.doFilter(req, res, chain);
        assertThat(chain.getRequest() != null).isEqualTo(res.getStatus() == 200);
        return res;
    }

    @Test
    void theClientAddressKeyTheHeadersAnd429() throws Exception {
        RateLimitServletFilter f = RateLimitServletFilter.of(rl, Limit.token(2, 1, Duration.ofMinutes(1)));
        String v6 = "2001:db8:77:" + Long.toHexString(System.nanoTime() & 0xff) + "00::1";
        assertThat(call(f, v6).getHeader("RateLimit")).startsWith("\"default\";r=1;t=");
        // another address of the same /56 is the same tenant
        assertThat(call(f, v6.replace("::1", "::2")).getStatus()).isEqualTo(200);
        MockHttpServletResponse refused = call(f, v6);
        assertThat(refused.getStatus()).isEqualTo(429);
        assertThat(refused.getHeader("Retry-After")).isNotBlank();
        assertThat(rl.peek("ratelimit:" + ClientAddress.tenant(v6))).isPresent();
    }

    @Test
    void aPausedServerFailsOpenOrClosed() throws Exception {
        try (RedisServer own = RedisServer.start();
                RateLimitClient c = RateLimitClient.of(io.lettuce.core.RedisClient.create(own.uri()),
                        Duration.ofMillis(300))) {
            Limit l = Limit.token(5, 1, Duration.ofSeconds(1));
            c.limit("warm", l);
            own.pause();
            try {
                assertThat(call(RateLimitServletFilter.of(c, l), "203.0.113.9").getStatus()).isEqualTo(200);
                RateLimitServletFilter closed = new RateLimitServletFilter(c, l, RateLimitServletFilter::clientAddress,
                        "ratelimit:", "default", false);
                assertThat(call(closed, "203.0.113.9").getStatus()).isEqualTo(503);
            }
            finally {
                own.resume();
            }
        }
    }
}

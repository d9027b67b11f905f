package io.github.redisratelimit.boot;

import java.time.Duration;

import org.springframework.boot.context.properties.ConfigurationProperties;

import io.github.redisratelimit.LimitSpec;

/**
 * {@code redis-ratelimit.*}: the client bean's timeout and the optional web filter.
 *
 * <pre>
 * redis-ratelimit.timeout: 2s
 * redis-ratelimit.web.enabled: true
 * redis-ratelimit.web.algorithm: slide     # period, slide, token, leaky
 * redis-ratelimit.web.limit: 100
 * redis-ratelimit.web.window: 1m
 * redis-ratelimit.web.policy: free         # or the server's policy, instead of the three above
 * redis-ratelimit.web.fail-open: true
 * </pre>
 */
@ConfigurationProperties("redis-ratelimit")
public class RateLimitProperties {

    private Duration timeout = Duration.ofSeconds(2);

    private final Web web = new Web();

    /** @return the client-side timeout of a call (and its DEADLINE) */
    public Duration getTimeout() {
        return timeout;
    }

    /** @param timeout the client-side timeout of a call */
    public void setTimeout(Duration timeout) {
        this.timeout = timeout;
    }

    /** @return the web filter's settings */
    public Web getWeb() {
        return web;
    }

    /** The web filter (WebFlux or servlet, whichever the application is): its limit per client. */
    public static class Web extends LimitSpec {

        private boolean enabled;

        private String prefix = "ratelimit:";

        private boolean failOpen = true;

        /** Sliding window of 100 per minute by default. */
        public Web() {
            setAlgorithm("slide");
        }

        /** @return whether the filter is registered */
        public boolean isEnabled() {
            return enabled;
        }

        /** @param enabled register the filter */
        public void setEnabled(boolean enabled) {
            this.enabled = enabled;
        }

        /** @return the key prefix */
        public String getPrefix() {
            return prefix;
        }

        /** @param prefix the key prefix */
        public void setPrefix(String prefix) {
            this.prefix = prefix;
        }

        /** @return let requests through when Redis fails */
        public boolean isFailOpen() {
            return failOpen;
        }

        /** @param failOpen let requests through when Redis fails, else answer 503 */
        public void setFailOpen(boolean failOpen) {
            this.failOpen = failOpen;
        }
    }
}

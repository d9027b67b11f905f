package io.github.redisratelimit.boot;

import java.time.Duration;

import org.springframework.boot.context.properties.ConfigurationProperties;

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

    /** The web filter (WebFlux or servlet, whichever the application is). */
    public static class Web {

        private boolean enabled;

        private String algorithm = "slide";

        private long limit = 100;

        private Duration window = Duration.ofMinutes(1);

        private String policy;

        private String prefix = "ratelimit:";

        private boolean failOpen = true;

        /** @return whether the filter is registered */
        public boolean isEnabled() {
            return enabled;
        }

        /** @param enabled register the filter */
        public void setEnabled(boolean enabled) {
            this.enabled = enabled;
        }

        /** @return period, slide, token or leaky */
        public String getAlgorithm() {
            return algorithm;
        }

        /** @param algorithm period, slide, token or leaky */
        public void setAlgorithm(String algorithm) {
            this.algorithm = algorithm;
        }

        /** @return permits per window per client */
        public long getLimit() {
            return limit;
        }

        /** @param limit permits per window per client */
        public void setLimit(long limit) {
            this.limit = limit;
        }

        /** @return the window */
        public Duration getWindow() {
            return window;
        }

        /** @param window the window */
        public void setWindow(Duration window) {
            this.window = window;
        }

        /** @return the server policy's name, or null */
        public String getPolicy() {
            return policy;
        }

        /** @param policy the server policy's name (replaces algorithm, limit and window) */
        public void setPolicy(String policy) {
            this.policy = policy;
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

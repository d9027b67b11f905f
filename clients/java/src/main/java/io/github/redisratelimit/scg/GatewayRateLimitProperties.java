package io.github.redisratelimit.scg;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;

import org.springframework.boot.context.properties.ConfigurationProperties;

import io.github.redisratelimit.LimitSpec;

/**
 * {@code redis-ratelimit.gateway.*}: what the drop-in adds to Spring Cloud Gateway's
 * {@code redis-rate-limiter.*} route arguments (which keep their meaning).
 *
 * <pre>
 * redis-ratelimit.gateway.timeout: 1s              # a decision's bound; past it the request is let through
 * redis-ratelimit.gateway.refill: step             # or smooth (tokens flow in to the ms)
 * redis-ratelimit.gateway.routes.search.policy: free            # the server's policy (RL.HIT)
 * redis-ratelimit.gateway.routes.orders.algorithm: period       # or slide: a quota
 * redis-ratelimit.gateway.routes.orders.limit: 1000
 * redis-ratelimit.gateway.routes.orders.window: 1d
 * </pre>
 */
@ConfigurationProperties("redis-ratelimit.gateway")
public class GatewayRateLimitProperties {

    private Duration timeout = Duration.ofSeconds(1);

    private Refill refill = Refill.STEP;

    private Map<String, RouteLimit> routes = new LinkedHashMap<>();

    /** @return the bound of one decision (the client's timeout and the call's DEADLINE) */
    public Duration getTimeout() {
        return timeout;
    }

    /** @param timeout the bound of one decision */
    public void setTimeout(Duration timeout) {
        this.timeout = timeout;
    }

    /** @return how the route arguments' token bucket refills */
    public Refill getRefill() {
        return refill;
    }

    /** @param refill how the route arguments' token bucket refills */
    public void setRefill(Refill refill) {
        this.refill = refill;
    }

    /** How the token bucket of {@code redis-rate-limiter.*} refills. */
    public enum Refill {
        /**
         * {@code replenishRate} whole tokens each second, on a grid of ms from the bucket's first
         * call on the server's clock: the stock limiter's counts (its script refills whole seconds).
         */
        STEP,
        /** Continuously, {@code replenishRate} tokens per second to the ms. */
        SMOOTH
    }

    /** @return the limits that replace the token bucket, by route id */
    public Map<String, RouteLimit> getRoutes() {
        return routes;
    }

    /** @param routes the limits that replace the token bucket, by route id */
    public void setRoutes(Map<String, RouteLimit> routes) {
        this.routes = routes;
    }

    /**
     * A route's limit in place of the token bucket of {@code redis-rate-limiter.*}: a server
     * policy, or a quota of {@code limit} per {@code window} ({@link LimitSpec}). The request's
     * cost stays {@code requestedTokens}.
     */
    public static class RouteLimit extends LimitSpec {

        /** An empty route limit (for property binding). */
        public RouteLimit() {
        }
    }
}

package io.github.redisratelimit.web;

import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.Objects;
import java.util.function.Function;

import org.springframework.http.HttpStatus;
import org.springframework.web.server.ServerWebExchange;
import org.springframework.web.server.WebFilter;
import org.springframework.web.server.WebFilterChain;

import io.github.redisratelimit.Limit;
import io.github.redisratelimit.Options;
import io.github.redisratelimit.RateLimitClient;
import reactor.core.publisher.Mono;

/**
 * A Spring WebFlux {@link WebFilter}: one module call per request on {@code prefix + tenant}
 * (the key layout of the other packages: {@code ratelimit:} and the client address, IPv6 by
 * {@code /56}), the IETF {@code RateLimit} / {@code RateLimit-Policy} headers on every response,
 * {@code 429} with {@code Retry-After} on a refusal. When Redis fails or does not answer within
 * the client's timeout the request is let through ({@code failOpen}) or answered {@code 503}.
 *
 * <pre>{@code
 * @Bean WebFilter rateLimit(RateLimitClient rl) {
 *     return RateLimitWebFilter.builder(rl, Limit.slide(100, Duration.ofMinutes(1))).build();
 * }
 * }</pre>
 */
public final class RateLimitWebFilter implements WebFilter {

    /** The key prefix every package's middleware uses by default. */
    public static final String DEFAULT_PREFIX = "ratelimit:";

    private final RateLimitClient client;
    private final Limit limit;
    private final String prefix;
    private final String policyName;
    private final Function<ServerWebExchange, String> key;
    private final boolean failOpen;

    private RateLimitWebFilter(Builder b) {
        this.client = b.client;
        this.limit = b.limit;
        this.prefix = b.prefix;
        this.policyName = b.policyName;
        this.key = b.key;
        this.failOpen = b.failOpen;
    }

    /**
     * @param client the module client
     * @param limit  the limit per tenant (an algorithm, or {@code Limit.policy(name)})
     * @return a builder
     */
    public static Builder builder(RateLimitClient client, Limit limit) {
        return new Builder(client, limit);
    }

    /**
     * The default tenant: the client address under {@link ClientAddress#tenant(String)}.
     *
     * @param exchange the exchange
     * @return the tenant
     */
    public static String clientAddress(ServerWebExchange exchange) {
        InetSocketAddress a = exchange.getRequest().getRemoteAddress();
        if (a == null) {
            return "unknown";
        }
        return ClientAddress.tenant(a.getAddress() != null ? a.getAddress().getHostAddress() : a.getHostString());
    }

    @Override
    public Mono<Void> filter(ServerWebExchange exchange, WebFilterChain chain) {
        String tenant = key.apply(exchange);
        if (tenant == null) {
            return chain.filter(exchange);
        }
        return client.reactive().limit(prefix + tenant, limit, Options.DEFAULT)
                .map(d -> HttpDecision.of(d, limit, policyName, failOpen))
                .onErrorResume(e -> Mono.just(HttpDecision.of(null, limit, policyName, failOpen)))
                .flatMap(h -> {
                    h.headers().forEach(exchange.getResponse().getHeaders()::set);
                    if (h.status() == 0) {
                        return chain.filter(exchange);
                    }
                    exchange.getResponse().setStatusCode(HttpStatus.valueOf(h.status()));
                    return exchange.getResponse().setComplete();
                });
    }

    /** Builds a {@link RateLimitWebFilter}. */
    public static final class Builder {

        private final RateLimitClient client;
        private final Limit limit;
        private String prefix = DEFAULT_PREFIX;
        private String policyName = "default";
        private Function<ServerWebExchange, String> key = RateLimitWebFilter::clientAddress;
        private boolean failOpen = true;

        private Builder(RateLimitClient client, Limit limit) {
            this.client = Objects.requireNonNull(client, "client");
            this.limit = Objects.requireNonNull(limit, "limit");
        }

        /**
         * @param prefix the key prefix (default {@code ratelimit:})
         * @return this builder
         */
        public Builder prefix(String prefix) {
            this.prefix = prefix;
            return this;
        }

        /**
         * @param key the tenant of a request (null: not limited); default the client address
         * @return this builder
         */
        public Builder key(Function<ServerWebExchange, String> key) {
            this.key = key;
            return this;
        }

        /**
         * @param name the name in the IETF headers (default {@code default})
         * @return this builder
         */
        public Builder policyName(String name) {
            this.policyName = name;
            return this;
        }

        /**
         * @param failOpen let requests through when Redis fails (default) or answer 503
         * @return this builder
         */
        public Builder failOpen(boolean failOpen) {
            this.failOpen = failOpen;
            return this;
        }

        /** @return the filter */
        public RateLimitWebFilter build() {
            return new RateLimitWebFilter(this);
        }
    }

    /** @return the timeout bounding a decision (the client's) */
    public Duration timeout() {
        return client.timeout();
    }
}

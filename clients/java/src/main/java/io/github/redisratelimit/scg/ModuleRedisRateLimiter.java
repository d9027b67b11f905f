package io.github.redisratelimit.scg;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;

import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.springframework.beans.factory.DisposableBean;
import org.springframework.cloud.gateway.filter.ratelimit.RedisRateLimiter;
import org.springframework.cloud.gateway.route.RouteDefinitionRouteLocator;
import org.springframework.cloud.gateway.support.ConfigurationService;
import org.springframework.data.redis.core.ReactiveStringRedisTemplate;
import org.springframework.data.redis.core.script.RedisScript;

import io.github.redisratelimit.Decision;
import io.github.redisratelimit.Limit;
import io.github.redisratelimit.Options;
import io.github.redisratelimit.RateLimitClient;
import reactor.core.publisher.Mono;

/**
 * Spring Cloud Gateway's {@link RedisRateLimiter}, decided by the redis-ratelimit module: one
 * {@code RL.TOKEN} call per request (no Lua), on the server's clock in ms, under one
 * cluster-safe key {@code request_rate_limiter.{routeId.id}}.
 *
 * <p>The route arguments keep their meaning: a bucket of {@code burstCapacity} tokens refilled
 * with {@code replenishRate} tokens per second (smoothly, not in whole seconds), each request
 * taking {@code requestedTokens}; {@code burstCapacity} 0 refuses every request. By default the
 * tokens arrive as whole seconds' worth ({@code STEP}) as the stock script's do, on a ms grid
 * from the bucket's first call; {@code redis-ratelimit.gateway.refill: smooth} refills to the ms. The four
 * {@code X-RateLimit-*} headers are sent while {@code includeHeaders} is on, with the IETF
 * {@code RateLimit} / {@code RateLimit-Policy} fields and, on a refusal, {@code Retry-After}.
 * A route may use a server policy or a minute/hour/day quota instead
 * ({@link GatewayRateLimitProperties}). When Redis fails or does not answer within the timeout
 * the request is let through, as the stock limiter does.
 */
public class ModuleRedisRateLimiter extends RedisRateLimiter implements DisposableBean {

    private static final Log LOG = LogFactory.getLog(ModuleRedisRateLimiter.class);

    private final Supplier<RateLimitClient> connect;
    private final GatewayRateLimitProperties properties;
    private volatile RateLimitClient client;

    /**
     * @param redisTemplate        the gateway's template (kept for the stock constructor)
     * @param script               the stock script bean (never run)
     * @param configurationService binds the routes' {@code redis-rate-limiter.*} arguments
     * @param connect              opens the module client on the first decision
     * @param properties           the drop-in's own settings
     */
    public ModuleRedisRateLimiter(ReactiveStringRedisTemplate redisTemplate, RedisScript<List<Long>> script,
            ConfigurationService configurationService, Supplier<RateLimitClient> connect,
            GatewayRateLimitProperties properties) {
        super(redisTemplate, script, configurationService);
        this.connect = connect;
        this.properties = properties;
    }

    private RateLimitClient client() {
        RateLimitClient c = client;
        if (c == null) {
            synchronized (this) {
                c = client;
                if (c == null) {
                    c = connect.get();
                    client = c;
                }
            }
        }
        return c;
    }

    /**
     * The cluster-safe key of a route and a caller: one key, its hash tag the stock limiter's.
     *
     * @param routeId the route
     * @param id      the caller (the key resolver's result)
     * @return the key
     */
    public static String key(String routeId, String id) {
        return "request_rate_limiter.{" + routeId + "." + id + "}";
    }

    @Override
    public Mono<Response> isAllowed(String routeId, String id) {
        Config config = getConfig().get(routeId);
        if (config == null) {
            config = getConfig().get(RouteDefinitionRouteLocator.DEFAULT_FILTERS);
        }
        if (config == null) {
            return Mono.error(new IllegalArgumentException("No Configuration found for route " + routeId
                    + " or defaultFilters"));
        }
        Config c = config;
        GatewayRateLimitProperties.RouteLimit route = properties.getRoutes().get(routeId);
        Limit limit;
        if (route != null) {
            limit = route.toLimit();
        }
        else if (c.getBurstCapacity() <= 0) {
            // a bucket of 0 tokens admits nothing (the stock script's answer, without a call)
            return Mono.just(new Response(false, headers(c, null, 0, 0)));
        }
        else {
            Limit bucket = Limit.token(c.getBurstCapacity(), c.getReplenishRate(), Duration.ofSeconds(1));
            limit = properties.getRefill() == GatewayRateLimitProperties.Refill.STEP ? bucket.step() : bucket;
        }
        long windowS = limit.kind() == Limit.Kind.PERIOD || limit.kind() == Limit.Kind.SLIDE
                ? Math.max(1, limit.periodMs() / 1000) : 0;
        return client().reactive().limit(key(routeId, id), limit, Options.cost(c.getRequestedTokens()))
                .map(d -> new Response(d.allowed(), headers(c, d, d.remaining(), windowS)))
                .onErrorResume(e -> {
                    LOG.error("rate limiting failed for route " + routeId + ": the request is let through", e);
                    return Mono.just(new Response(true, getHeaders(c, -1L)));
                });
    }

    private Map<String, String> headers(Config c, Decision d, long remaining, long windowS) {
        Map<String, String> h = new LinkedHashMap<>(getHeaders(c, remaining));
        if (isIncludeHeaders() && d != null) {
            h.putAll(d.headers("default", windowS));
        }
        return h;
    }

    @Override
    public void destroy() {
        RateLimitClient c = client;
        if (c != null) {
            c.close();
        }
    }
}

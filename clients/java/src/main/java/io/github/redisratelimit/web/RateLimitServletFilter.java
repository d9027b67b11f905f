package io.github.redisratelimit.web;

import java.io.IOException;
import java.util.Objects;
import java.util.function.Function;

import jakarta.servlet.Filter;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.ServletRequest;
import jakarta.servlet.ServletResponse;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;

import io.github.redisratelimit.Decision;
import io.github.redisratelimit.Limit;
import io.github.redisratelimit.Options;
import io.github.redisratelimit.RateLimitClient;
import io.github.redisratelimit.RateLimitException;

/**
 * A servlet {@link Filter} (Spring MVC registers any {@code Filter} bean): the
 * {@link RateLimitWebFilter}'s behaviour for servlet applications — one module call per request
 * on {@code ratelimit:<tenant>} (the client address under the shared key layout by default), the
 * IETF headers, {@code 429} with {@code Retry-After}, fail open or {@code 503} within the
 * client's timeout.
 */
public final class RateLimitServletFilter implements Filter {

    private final RateLimitClient client;
    private final Limit limit;
    private final Function<HttpServletRequest, String> key;
    private final String prefix;
    private final String policyName;
    private final boolean failOpen;

    /**
     * @param client     the module client
     * @param limit      the limit per tenant
     * @param key        the tenant of a request (null: not limited), e.g.
     *                   {@link #clientAddress(HttpServletRequest)}
     * @param prefix     the key prefix ({@link RateLimitWebFilter#DEFAULT_PREFIX})
     * @param policyName the name in the IETF headers
     * @param failOpen   let requests through when Redis fails, else answer 503
     */
    public RateLimitServletFilter(RateLimitClient client, Limit limit, Function<HttpServletRequest, String> key,
            String prefix, String policyName, boolean failOpen) {
        this.client = Objects.requireNonNull(client, "client");
        this.limit = Objects.requireNonNull(limit, "limit");
        this.key = Objects.requireNonNull(key, "key");
        this.prefix = prefix;
        this.policyName = policyName;
        this.failOpen = failOpen;
    }

    /**
     * @param client the module client
     * @param limit  the limit per client address
     * @return the filter with the defaults of the other packages' middleware
     */
    public static RateLimitServletFilter of(RateLimitClient client, Limit limit) {
        return new RateLimitServletFilter(client, limit, RateLimitServletFilter::clientAddress,
                RateLimitWebFilter.DEFAULT_PREFIX, "default", true);
    }

    /**
     * @param request the request
     * @return its client address under the shared key layout
     */
    public static String clientAddress(HttpServletRequest request) {
        String a = request.getRemoteAddr();
        return a == null ? "unknown" : ClientAddress.tenant(a);
    }

    @Override
    public void doFilter(ServletRequest req, ServletResponse res, FilterChain chain)
            throws IOException, ServletException {
        if (!(req instanceof HttpServletRequest request) || !(res instanceof HttpServletResponse response)) {
            chain.doFilter(req, res);
            return;
        }
        String tenant = key.apply(request);
        if (tenant == null) {
            chain.doFilter(req, res);
            return;
        }
        Decision d;
        try {
            d = client.limit(prefix + tenant, limit, Options.DEFAULT);
        }
        catch (RateLimitException e) {
            d = null;
        }
        HttpDecision h = HttpDecision.of(d, limit, policyName, failOpen);
        h.headers().forEach(response::setHeader);
        if (h.status() == 0) {
            chain.doFilter(req, res);
            return;
        }
        response.setStatus(h.status());
    }
}

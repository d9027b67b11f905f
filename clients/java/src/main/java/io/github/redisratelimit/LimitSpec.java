package io.github.redisratelimit;

import java.time.Duration;
import java.util.Locale;

/**
 * A limit as configuration properties bind it (Spring's {@code redis-ratelimit.*}): a server
 * policy, or {@code limit} per {@code window} with an algorithm ({@code period}: fixed window,
 * {@code slide}: sliding window, {@code token}: a bucket of {@code limit} refilled over the
 * window, {@code leaky}: a leaky bucket as a meter).
 */
public class LimitSpec {

    private String policy;

    private String algorithm = "period";

    private long limit = 100;

    private Duration window = Duration.ofMinutes(1);

    private boolean align;

    /** An empty spec: 100 per minute, fixed window (for property binding). */
    public LimitSpec() {
    }

    /** @return the limit this spec describes */
    public Limit toLimit() {
        if (policy != null && !policy.isBlank()) {
            return Limit.policy(policy);
        }
        return switch (algorithm.toLowerCase(Locale.ROOT)) {
            case "period" -> align ? Limit.period(limit, window).align() : Limit.period(limit, window);
            case "slide" -> Limit.slide(limit, window);
            case "token" -> Limit.token(limit, limit, window);
            case "leaky" -> Limit.leaky(limit, limit, window).nodelay();
            default -> throw new IllegalArgumentException("unknown algorithm '" + algorithm
                    + "' (use period, slide, token, leaky, or a policy)");
        };
    }

    /** @return the server policy's name, or null */
    public String getPolicy() {
        return policy;
    }

    /** @param policy the server policy's name (replaces algorithm, limit and window) */
    public void setPolicy(String policy) {
        this.policy = policy;
    }

    /** @return period, slide, token or leaky */
    public String getAlgorithm() {
        return algorithm;
    }

    /** @param algorithm period, slide, token or leaky */
    public void setAlgorithm(String algorithm) {
        this.algorithm = algorithm;
    }

    /** @return permits per window */
    public long getLimit() {
        return limit;
    }

    /** @param limit permits per window */
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

    /** @return fixed windows on UTC calendar boundaries (a day from midnight UTC) */
    public boolean isAlign() {
        return align;
    }

    /** @param align fixed windows on UTC calendar boundaries */
    public void setAlign(boolean align) {
        this.align = align;
    }
}

package io.github.redisratelimit;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The module's answer to one request: the five integers every limiting command replies with.
 *
 * @param allowed      the request is admitted (and was counted, unless it was a dry run)
 * @param limit        the configured maximum (capacity of a bucket, limit of a window)
 * @param remaining    whole permits left after this request, {@code 0 … limit}
 * @param retryAfterMs refused: ms until the same request would be admitted, {@code -1} if it
 *                     never can; admitted: 0, except a leaky bucket in delay mode (its delay)
 * @param resetAfterMs ms until the limiter is back in its initial state
 * @param taken        permits taken by an {@code ATMOST} call, else {@code -1}
 */
public record Decision(boolean allowed, long limit, long remaining, long retryAfterMs, long resetAfterMs,
        long taken) {

    /** A decision without an {@code ATMOST} count. */
    public Decision(boolean allowed, long limit, long remaining, long retryAfterMs, long resetAfterMs) {
        this(allowed, limit, remaining, retryAfterMs, resetAfterMs, -1);
    }

    static Decision of(Object reply) {
        List<?> r = Replies.list(reply, "a decision");
        if (r.size() < 5) {
            throw new RateLimitException("unexpected reply (not a decision): " + reply);
        }
        long taken = r.size() > 5 && r.get(5) instanceof Long t ? t : -1;
        return new Decision(Replies.num(r.get(0)) == 1, Replies.num(r.get(1)), Replies.num(r.get(2)),
                Replies.num(r.get(3)), Replies.num(r.get(4)), taken);
    }

    /**
     * The response header fields of draft-ietf-httpapi-ratelimit-headers: {@code RateLimit-Policy:
     * "<policy>";q=<limit>[;w=<window s>]}, {@code RateLimit: "<policy>";r=<remaining>;t=<s until
     * reset, rounded up>} and, on a refusal that can be retried, {@code Retry-After} in seconds.
     *
     * @param policy  the policy's name
     * @param windowS the window in seconds, or {@code 0} for none (a bucket has none)
     * @return the header fields, in that order
     */
    public Map<String, String> headers(String policy, long windowS) {
        String name = '"' + policy.replace("\\", "\\\\").replace("\"", "\\\"") + '"';
        Map<String, String> h = new LinkedHashMap<>();
        h.put("RateLimit-Policy", name + ";q=" + limit + (windowS > 0 ? ";w=" + windowS : ""));
        h.put("RateLimit", name + ";r=" + remaining + ";t=" + ceilSeconds(Math.max(0, resetAfterMs)));
        if (!allowed && retryAfterMs >= 0) {
            h.put("Retry-After", Long.toString(ceilSeconds(retryAfterMs)));
        }
        return h;
    }

    /** @return {@link #headers(String, long)} for the policy {@code "default"} without a window */
    public Map<String, String> headers() {
        return headers("default", 0);
    }

    /** @return the IETF {@code RateLimit} field value for the policy {@code "default"} */
    public String rateLimitHeader() {
        return headers().get("RateLimit");
    }

    /** @return the IETF {@code RateLimit-Policy} field value for the policy {@code "default"} */
    public String rateLimitPolicyHeader() {
        return headers().get("RateLimit-Policy");
    }

    static long ceilSeconds(long ms) {
        return ms / 1000 + (ms % 1000 == 0 ? 0 : 1);
    }
}

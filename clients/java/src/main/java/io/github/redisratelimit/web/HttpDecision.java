package io.github.redisratelimit.web;

import java.util.Map;

import io.github.redisratelimit.Decision;
import io.github.redisratelimit.Limit;

/**
 * What the web filters answer for one decision: the status (0: pass the request on) and the
 * headers, for a decision or a failure ({@code null} decision) under fail open or closed.
 *
 * @param status  0 to pass the request on, else 429 (refused) or 503 (Redis failed, fail closed)
 * @param headers the IETF fields to set
 */
record HttpDecision(int status, Map<String, String> headers) {

    static HttpDecision of(Decision d, Limit limit, String policyName, boolean failOpen) {
        if (d == null) {
            return new HttpDecision(failOpen ? 0 : 503, Map.of());
        }
        long windowS = limit.kind() == Limit.Kind.PERIOD || limit.kind() == Limit.Kind.SLIDE
                ? Math.max(1, limit.periodMs() / 1000) : 0;
        return new HttpDecision(d.allowed() ? 0 : 429, d.headers(policyName, windowS));
    }
}

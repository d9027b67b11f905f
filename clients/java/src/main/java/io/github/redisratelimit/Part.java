package io.github.redisratelimit;

import java.util.Objects;

/**
 * One limit of an {@code RL.ALL} call: a key, its limit (or policy), the cost, and whether it is
 * a {@code SHADOW} limit (judged and answered, never refusing).
 *
 * @param key    the key
 * @param limit  the limit
 * @param cost   permits taken
 * @param shadow judged without refusing
 */
public record Part(String key, Limit limit, long cost, boolean shadow) {

    /** Validates the part. */
    public Part {
        Objects.requireNonNull(key, "key");
        Objects.requireNonNull(limit, "limit");
        if (cost < 0) {
            throw new IllegalArgumentException("cost must be >= 0: " + cost);
        }
    }

    /**
     * @param key   the key
     * @param limit the limit
     * @return the part with cost 1
     */
    public static Part of(String key, Limit limit) {
        return new Part(key, limit, 1, false);
    }
}

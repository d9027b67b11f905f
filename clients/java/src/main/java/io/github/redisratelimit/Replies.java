package io.github.redisratelimit;

import java.util.List;

/** Reading the module's replies (integers, strings, arrays) with clear errors. */
final class Replies {

    private Replies() {
    }

    static List<?> list(Object reply, String what) {
        if (reply instanceof List<?> l) {
            return l;
        }
        throw new RateLimitException("unexpected reply (not " + what + "): " + reply);
    }

    static long num(Object o) {
        if (o instanceof Long l) {
            return l;
        }
        if (o instanceof String s) {
            try {
                return Long.parseLong(s);
            }
            catch (NumberFormatException e) {
                throw new RateLimitException("unexpected reply (not an integer): " + s, e);
            }
        }
        throw new RateLimitException("unexpected reply (not an integer): " + o);
    }
}

package io.github.redisratelimit;

import java.util.List;
import java.util.function.Function;

/**
 * One prepared call: the command, its arguments (the key at {@code keyIndex}), how long it may
 * wait on the server ({@code -1}: it does not wait; 0: without limit), whether it takes a
 * {@code DEADLINE}, and how its reply is read.
 */
record Request<T>(Command command, List<String> args, int keyIndex, long waitMs, boolean deadline,
        Function<Object, T> parse) {
}

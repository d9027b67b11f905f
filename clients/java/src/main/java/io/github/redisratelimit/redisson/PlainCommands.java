package io.github.redisratelimit.redisson;

import java.util.List;

import io.lettuce.core.SetArgs;
import io.lettuce.core.cluster.api.sync.RedisClusterCommands;

/**
 * The plain Redis commands the drop-in needs beside the module's (the rate definition is a
 * string key: {@code SET NX PX} creates it with its keep-alive in one call).
 */
final class PlainCommands {

    private final RedisClusterCommands<String, String> redis;

    PlainCommands(RedisClusterCommands<String, String> redis) {
        this.redis = redis;
    }

    String get(String key) {
        return redis.get(key);
    }

    /** @return whether it was set (NX: only when missing; XX: only when present) */
    boolean set(String key, String value, long pxMs, boolean nx, boolean xx) {
        SetArgs a = new SetArgs();
        if (pxMs > 0) {
            a.px(pxMs);
        }
        if (nx) {
            a.nx();
        }
        if (xx) {
            a.xx();
        }
        if (pxMs <= 0 && xx) {
            a.keepttl();
        }
        return "OK".equals(redis.set(key, value, a));
    }

    long del(List<String> keys) {
        return redis.del(keys.toArray(String[]::new));
    }

    boolean exists(String key) {
        return redis.exists(key) > 0;
    }

    boolean pexpire(String key, long ms) {
        return redis.pexpire(key, ms);
    }

    boolean pexpireat(String key, long unixMs) {
        return redis.pexpireat(key, unixMs);
    }

    boolean persist(String key) {
        return redis.persist(key);
    }

    long pttl(String key) {
        return redis.pttl(key);
    }
}

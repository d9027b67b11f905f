package io.github.redisratelimit.redisson;

import java.util.List;
import java.util.concurrent.CompletableFuture;

import io.lettuce.core.SetArgs;
import io.lettuce.core.cluster.api.async.RedisClusterAsyncCommands;

/**
 * The plain Redis commands the drop-in needs beside the module's (the rate definition is a
 * string key: {@code SET NX PX} creates it with its keep-alive in one call), over Lettuce's
 * asynchronous API: no thread waits for a reply.
 */
final class PlainCommands {

    private final RedisClusterAsyncCommands<String, String> redis;

    PlainCommands(RedisClusterAsyncCommands<String, String> redis) {
        this.redis = redis;
    }

    CompletableFuture<String> get(String key) {
        return redis.get(key).toCompletableFuture();
    }

    /** @return whether it was set (NX: only when missing; XX: only when present) */
    CompletableFuture<Boolean> set(String key, String value, long pxMs, boolean nx, boolean xx) {
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
        return redis.set(key, value, a).toCompletableFuture().thenApply("OK"::equals);
    }

    CompletableFuture<Long> del(List<String> keys) {
        return redis.del(keys.toArray(String[]::new)).toCompletableFuture();
    }

    CompletableFuture<Boolean> exists(String key) {
        return redis.exists(key).toCompletableFuture().thenApply(n -> n > 0);
    }

    CompletableFuture<Boolean> pexpire(String key, long ms) {
        return redis.pexpire(key, ms).toCompletableFuture();
    }

    CompletableFuture<Boolean> pexpireat(String key, long unixMs) {
        return redis.pexpireat(key, unixMs).toCompletableFuture();
    }

    CompletableFuture<Boolean> persist(String key) {
        return redis.persist(key).toCompletableFuture();
    }

    CompletableFuture<Long> pttl(String key) {
        return redis.pttl(key).toCompletableFuture();
    }
}

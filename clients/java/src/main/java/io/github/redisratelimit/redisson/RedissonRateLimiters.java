package io.github.redisratelimit.redisson;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.util.UUID;

import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

import io.github.redisratelimit.RateLimitClient;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisCredentials;
import io.lettuce.core.RedisCredentialsProvider;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.codec.StringCodec;

/**
 * Redisson's {@code RRateLimiter}, decided by the redis-ratelimit module: one changed line,
 *
 * <pre>{@code
 * RedissonClient redisson = RedissonRateLimiters.wrap(Redisson.create(config));
 * RRateLimiter limiter = redisson.getRateLimiter("api");   // now the module's
 * }</pre>
 *
 * <p>{@link #wrap(RedissonClient)} returns a client that delegates everything to Redisson except
 * {@code getRateLimiter(name)}, which gives a {@link ModuleRateLimiter}: the same rate type,
 * rate, interval, keep-alive, {@code setRate}/{@code updateRate} semantics and error messages,
 * with the permits kept by the module ({@code RL.SLIDE}, an exact sliding window) instead of a
 * sorted set, and the waits of {@code acquire}/{@code tryAcquire(timeout)} done on the server
 * ({@code WAIT}, in arrival order) instead of polling. The module client connects to the
 * server(s) of the Redisson client's configuration (single server or cluster).
 */
public final class RedissonRateLimiters {

    private RedissonRateLimiters() {
    }

    /**
     * @param redisson the application's Redisson client
     * @return a client whose rate limiters are the module's; shutting it down closes the module
     *         connections too
     */
    public static RedissonClient wrap(RedissonClient redisson) {
        Config config = redisson.getConfig();
        RedisURI uri;
        if (config.isSingleConfig()) {
            uri = RedisURI.create(config.useSingleServer().getAddress());
            uri.setDatabase(config.useSingleServer().getDatabase());
        }
        else if (config.isClusterConfig()) {
            throw new UnsupportedOperationException("cluster: wrap(RedissonClient, RateLimitClient) with a client of "
                    + "RateLimitClient.createCluster(...)");
        }
        else {
            throw new UnsupportedOperationException("only single-server and cluster Redisson configurations");
        }
        if (config.getPassword() != null) {
            String user = config.getUsername();
            char[] password = config.getPassword().toCharArray();
            uri.setCredentialsProvider(RedisCredentialsProvider.from(() -> RedisCredentials.just(user, password)));
        }
        RedisClient lettuce = RedisClient.create(uri);
        RateLimitClient module = RateLimitClient.of(lettuce, RateLimitClient.DEFAULT_TIMEOUT);
        StatefulRedisConnection<String, String> plain = lettuce.connect(StringCodec.UTF8);
        return wrap(redisson, module, new PlainCommands(plain.sync()), () -> {
            plain.close();
            module.close();
            lettuce.shutdown();
        });
    }

    static RedissonClient wrap(RedissonClient redisson, RateLimitClient module, PlainCommands plain,
            Runnable onShutdown) {
        String clientId = UUID.randomUUID().toString();
        return (RedissonClient) Proxy.newProxyInstance(RedissonRateLimiters.class.getClassLoader(),
                new Class<?>[] { RedissonClient.class }, (proxy, method, args) -> {
                    switch (method.getName()) {
                        case "getRateLimiter":
                            if (args != null && args.length == 1 && args[0] instanceof String name) {
                                return ModuleRateLimiter.proxy(new ModuleRateLimiter(name, clientId, module, plain));
                            }
                            break;
                        case "shutdown":
                            onShutdown.run();
                            break;
                        default:
                            break;
                    }
                    return call(redisson, method, args);
                });
    }

    static Object call(Object target, Method method, Object[] args) throws Throwable {
        try {
            return method.invoke(target, args);
        }
        catch (InvocationTargetException e) {
            throw e.getCause();
        }
    }
}

package io.github.redisratelimit.redisson;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;

import org.redisson.Redisson;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;
import org.redisson.connection.ServiceManager;

import io.github.redisratelimit.RateLimitClient;
import io.lettuce.core.AbstractRedisClient;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisCredentials;
import io.lettuce.core.RedisCredentialsProvider;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulConnection;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.lettuce.core.cluster.api.async.RedisClusterAsyncCommands;
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
 * sorted set; {@code acquire}/{@code tryAcquire(timeout)} wait as stock does (a refused call is
 * tried again after the answered retry plus stock's 3 ms, on a timer). The module client connects to the
 * server(s) of the Redisson client's configuration (single server, or a cluster's seed nodes:
 * every call goes to its key's node).
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
        List<RedisURI> uris = new ArrayList<>();
        if (config.isSingleConfig()) {
            RedisURI uri = RedisURI.create(config.useSingleServer().getAddress());
            uri.setDatabase(config.useSingleServer().getDatabase());
            uris.add(uri);
        }
        else if (config.isClusterConfig()) {
            for (String address : config.useClusterServers().getNodeAddresses()) {
                uris.add(RedisURI.create(address));
            }
        }
        else {
            throw new UnsupportedOperationException("redis-ratelimit wraps single-server and cluster Redisson "
                    + "configurations");
        }
        if (config.getPassword() != null) {
            String user = config.getUsername();
            char[] password = config.getPassword().toCharArray();
            for (RedisURI uri : uris) {
                uri.setCredentialsProvider(RedisCredentialsProvider.from(() -> RedisCredentials.just(user, password)));
            }
        }
        if (config.isClusterConfig()) {
            RedisClusterClient lettuce = RedisClusterClient.create(uris);
            StatefulRedisClusterConnection<String, String> plain = lettuce.connect(StringCodec.UTF8);
            return wrap(redisson, RateLimitClient.of(lettuce, RateLimitClient.DEFAULT_TIMEOUT), plain.async(), plain,
                    lettuce);
        }
        RedisClient lettuce = RedisClient.create(uris.get(0));
        StatefulRedisConnection<String, String> plain = lettuce.connect(StringCodec.UTF8);
        return wrap(redisson, RateLimitClient.of(lettuce, RateLimitClient.DEFAULT_TIMEOUT), plain.async(), plain,
                lettuce);
    }

    private static RedissonClient wrap(RedissonClient redisson, RateLimitClient module,
            RedisClusterAsyncCommands<String, String> commands, StatefulConnection<String, String> plain,
            AbstractRedisClient lettuce) {
        return wrap(redisson, module, new PlainCommands(commands), lettuce.getResources().eventExecutorGroup(), () -> {
            plain.close();
            module.close();
            lettuce.shutdown();
        });
    }

    static RedissonClient wrap(RedissonClient redisson, RateLimitClient module, PlainCommands plain,
            Executor executor, Runnable onShutdown) {
        String clientId = UUID.randomUUID().toString();
        ModuleRateLimiter.Delay delay = timerOf(redisson, executor);
        return (RedissonClient) Proxy.newProxyInstance(RedissonRateLimiters.class.getClassLoader(),
                new Class<?>[] { RedissonClient.class }, (proxy, method, args) -> {
                    switch (method.getName()) {
                        case "getRateLimiter":
                            if (args != null && args.length == 1 && args[0] instanceof String name) {
                                return ModuleRateLimiter.proxy(new ModuleRateLimiter(name, clientId, module, plain, executor, delay));
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

    /**
     * The timer a waiter sleeps on: the Redisson client's own (its {@code HashedWheelTimer}, whose
     * tick follows the client's timeout and retry delay), as stock's {@code RRateLimiter} sleeps;
     * the JDK's delay scheduler when the client is not Redisson's own class.
     */
    static ModuleRateLimiter.Delay timerOf(RedissonClient redisson, Executor executor) {
        if (redisson instanceof Redisson r) {
            ServiceManager service = r.getServiceManager();
            return ns -> {
                CompletableFuture<Void> done = new CompletableFuture<>();
                service.newTimeout(t -> done.complete(null), ns, TimeUnit.NANOSECONDS);
                return done;
            };
        }
        return ModuleRateLimiter.Delay.on(executor);
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

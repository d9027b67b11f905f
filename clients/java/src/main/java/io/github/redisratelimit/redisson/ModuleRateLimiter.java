package io.github.redisratelimit.redisson;

import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;

import org.redisson.api.RRateLimiter;
import org.redisson.api.RateIntervalUnit;
import org.redisson.api.RateLimiterConfig;
import org.redisson.api.RateType;
import org.redisson.api.ratelimiter.RateLimiterArgs;
import org.redisson.api.ratelimiter.RateLimiterParams;
import org.redisson.client.RedisException;
import org.redisson.misc.CompletableFutureWrapper;

import io.github.redisratelimit.Decision;
import io.github.redisratelimit.Limit;
import io.github.redisratelimit.Options;
import io.github.redisratelimit.RateLimitClient;

/**
 * One named rate limiter with Redisson's {@code RRateLimiter} semantics on the module.
 *
 * <p>Keys (one hash tag, so a cluster keeps them together):
 * <ul>
 * <li>{@code name}: the rate definition, a string {@code "<type> <rate> <interval ms>
 * <keep-alive ms>"}; the only key {@code trySetRate} creates, with the keep-alive as its TTL
 * ({@code SET NX PX}), and the one {@code isExists}/{@code remainTimeToLive} read;</li>
 * <li>{@code {name}:rl} ({@code OVERALL}) or {@code {name}:rl:<client id>} ({@code PER_CLIENT}):
 * the permits, an exact {@code RL.SLIDE} window of {@code rate} per {@code interval}; the module
 * expires it once its last permit has left the window.</li>
 * </ul>
 * Each decision is one {@code RL.SLIDE} call with the definition read just before it (a rate
 * changed by another client applies from its next call).
 */
final class ModuleRateLimiter {

    static final String EXCEEDS = "Requested permits amount cannot exceed defined rate";

    private final String name;
    private final String clientId;
    private final RateLimitClient module;
    private final PlainCommands plain;
    private final Executor executor;
    private final Delay delay;
    private final long slackMs;

    /** A timer: a future completed {@code ns} nanoseconds from now, no thread waiting meanwhile. */
    @FunctionalInterface
    interface Delay {
        CompletableFuture<Void> after(long ns);

        /** On {@code executor}, by the JDK's delay scheduler. */
        static Delay on(Executor executor) {
            return ns -> CompletableFuture.runAsync(() -> { },
                    CompletableFuture.delayedExecutor(ns, TimeUnit.NANOSECONDS, executor));
        }
    }

    /**
     * @param executor runs the module call that follows a read of the definition and a waiter's
     *                 next try: Lettuce's computation threads, not the I/O event loop that
     *                 completes the read
     */
    ModuleRateLimiter(String name, String clientId, RateLimitClient module, PlainCommands plain, Executor executor,
            Delay delay) {
        this(name, clientId, module, plain, executor, delay, WAIT_SLACK_MS);
    }

    /**
     * @param delay   the timer a waiter sleeps on (the wrapped Redisson client's own, as stock's)
     * @param slackMs added to every answered retry before a waiter tries again (stock: 3 ms)
     */
    ModuleRateLimiter(String name, String clientId, RateLimitClient module, PlainCommands plain, Executor executor,
            Delay delay, long slackMs) {
        this.name = name;
        this.clientId = clientId;
        this.module = module;
        this.plain = plain;
        this.executor = executor;
        this.delay = delay;
        this.slackMs = slackMs;
    }

    /** The rate definition stored under the limiter's name. */
    record Definition(RateType type, long rate, long intervalMs, long keepAliveMs) {

        String encode() {
            return type.name() + " " + rate + " " + intervalMs + " " + keepAliveMs;
        }

        static Definition decode(String s) {
            if (s == null) {
                return null;
            }
            String[] f = s.split(" ");
            if (f.length != 4) {
                throw new RedisException("not a redis-ratelimit rate definition: " + s);
            }
            return new Definition(RateType.valueOf(f[0]), Long.parseLong(f[1]), Long.parseLong(f[2]),
                    Long.parseLong(f[3]));
        }

        Limit limit() {
            return Limit.slide(rate, Duration.ofMillis(intervalMs));
        }
    }

    private String overallKey() {
        return "{" + name + "}:rl";
    }

    private String clientKey() {
        return "{" + name + "}:rl:" + clientId;
    }

    private String stateKey(Definition d) {
        return d.type() == RateType.PER_CLIENT ? clientKey() : overallKey();
    }

    /** The definition, or Redisson's error when the limiter has none. */
    private CompletableFuture<Definition> definition() {
        return plain.get(name).thenApply(s -> {
            Definition d = Definition.decode(s);
            if (d == null) {
                throw new RedisException("RateLimiter is not initialized");
            }
            return d;
        });
    }

    private static Definition define(RateType type, long rate, Duration interval, Duration keepAlive) {
        if (rate <= 0) {
            throw new IllegalArgumentException("rate should be greater than 0");
        }
        long intervalMs = interval.toMillis();
        if (intervalMs <= 0) {
            throw new IllegalArgumentException("rateInterval should be greater than 0");
        }
        long keepAliveMs = keepAlive == null ? 0 : keepAlive.toMillis();
        if (keepAliveMs > 0 && keepAliveMs < intervalMs) {
            throw new IllegalArgumentException("keepAliveTime should be greater than or equal to rateInterval");
        }
        return new Definition(type, rate, intervalMs, keepAliveMs);
    }

    // Every operation is a chain of Lettuce's asynchronous calls (no thread waits on a reply);
    // the synchronous methods of RRateLimiter wait for it (see invoke).

    // ---- RRateLimiter: setting the rate

    CompletableFuture<Boolean> trySetRate(RateType type, long rate, Duration interval, Duration keepAlive) {
        Definition d = define(type, rate, interval, keepAlive);
        return plain.set(name, d.encode(), d.keepAliveMs(), true, false);
    }

    CompletableFuture<Void> setRate(RateType type, long rate, Duration interval, Duration keepAlive,
            boolean keepState) {
        Definition d = define(type, rate, interval, keepAlive);
        return plain.get(name).thenCompose(s -> {
            Definition old = Definition.decode(s);
            return plain.set(name, d.encode(), d.keepAliveMs(), false, false)
                    .thenCompose(set -> !keepState || old != null && old.type() != d.type() ? dropState()
                            : CompletableFuture.completedFuture(null));
        });
    }

    CompletableFuture<Boolean> updateRate(RateLimiterArgs args) {
        RateLimiterParams p = (RateLimiterParams) args;
        Definition d = define(p.getMode(), p.getRate(), p.getRateInterval(), p.getKeepAliveTime());
        return plain.get(name).thenCompose(s -> {
            Definition old = Definition.decode(s);
            if (old == null) {
                return CompletableFuture.completedFuture(false);
            }
            return plain.set(name, d.encode(), d.keepAliveMs(), false, true).thenCompose(set -> {
                if (!set) {
                    return CompletableFuture.completedFuture(false);
                }
                return old.type() != d.type() || !p.isKeepState() ? dropState().thenApply(v -> true)
                        : CompletableFuture.completedFuture(true);
            });
        });
    }

    /** Deletes the permits' state (both kinds), keeping the definition. */
    private CompletableFuture<Void> dropState() {
        return plain.del(List.of(overallKey(), clientKey())).thenApply(n -> null);
    }

    CompletableFuture<RateLimiterConfig> getConfig() {
        return definition().thenApply(d -> new RateLimiterConfig(d.type(), d.intervalMs(), d.rate()));
    }

    // ---- acquiring

    /**
     * What a waiter adds to the answered retry before it tries again, as stock Redisson: its
     * script answers {@code 3 + interval - (now - oldest permit)} ms and its client sleeps that
     * on its timer, whose tick (10-100 ms by the client's configuration) rounds it up; the drop-in
     * sleeps on the same timer.
     */
    static final long WAIT_SLACK_MS = 3;

    /**
     * Takes permits as stock Redisson's {@code tryAcquire}/{@code acquire} do: one
     * {@code RL.SLIDE} (without {@code WAIT}); refused, sleep the answered retry plus the slack
     * ({@link #WAIT_SLACK_MS}) on the Redisson client's timer, as stock (no thread waits; its
     * ticks, 100 ms by default, round the sleep up as they do stock's) and try again while the timeout
     * allows. A refused call counted nothing, so trying again is not a blind retry.
     *
     * @param permits permits to take
     * @param waitMs  -1: no wait; 0: wait without limit; else the longest wait
     */
    CompletableFuture<Boolean> take(long permits, long waitMs) {
        long deadlineNs = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(Math.max(0, waitMs));
        return attempt(permits, waitMs, deadlineNs);
    }

    /** One try of {@link #take}: the definition (a changed rate applies), then one RL.SLIDE. */
    private CompletableFuture<Boolean> attempt(long permits, long waitMs, long deadlineNs) {
        return definition().thenComposeAsync(d -> {
            if (permits > d.rate()) {
                throw new RedisException(EXCEEDS);
            }
            long sentNs = System.nanoTime();
            return module.async().limit(stateKey(d), d.limit(), Options.cost(permits)).thenCompose(decision -> {
                if (decision.allowed()) {
                    return d.keepAliveMs() > 0 ? plain.pexpire(name, d.keepAliveMs()).thenApply(x -> true)
                            : CompletableFuture.completedFuture(true);
                }
                if (waitMs < 0) {
                    return CompletableFuture.completedFuture(false);
                }
                // -1 (never) cannot follow the check above; wait an interval if it does
                long sleepMs = (decision.retryAfterMs() < 0 ? d.intervalMs() : decision.retryAfterMs())
                        + slackMs;
                if (waitMs > 0) {
                    // the wake measured from when this call was sent (the server answered later):
                    // a waiter whose timeout covers the permit's expiry + the slack tries again
                    if (deadlineNs - sentNs < TimeUnit.MILLISECONDS.toNanos(sleepMs)) {
                        // stock sleeps out what is left of the timeout, then refuses
                        return delay.after(Math.max(0, deadlineNs - System.nanoTime())).thenApply(x -> false);
                    }
                }
                return delay.after(TimeUnit.MILLISECONDS.toNanos(sleepMs)).thenCompose(x -> attempt(permits, waitMs, deadlineNs));
            });
        }, executor);
    }

    CompletableFuture<Long> availablePermits() {
        return definition().thenComposeAsync(d -> module.async().limit(stateKey(d), d.limit(), Options.cost(0)),
                executor).thenApply(Decision::remaining);
    }

    CompletableFuture<Void> release(long permits) {
        if (permits < 0) {
            throw new IllegalArgumentException("permits amount can't be negative");
        }
        if (permits == 0) {
            return CompletableFuture.completedFuture(null);
        }
        return definition().thenComposeAsync(d -> module.async().refund(stateKey(d), permits), executor)
                .thenApply(x -> null);
    }

    // ---- RObject / RExpirable

    private List<String> keys() {
        return List.of(name, overallKey(), clientKey());
    }

    CompletableFuture<Boolean> delete() {
        return plain.del(keys()).thenApply(n -> n > 0);
    }

    /** Applies {@code op} to every key: true when any of them had it applied. */
    private CompletableFuture<Boolean> onEveryKey(Function<String, CompletableFuture<Boolean>> op) {
        CompletableFuture<Boolean> any = CompletableFuture.completedFuture(false);
        for (String k : keys()) {
            CompletableFuture<Boolean> one = op.apply(k);
            any = any.thenCombine(one, (x, y) -> x || y);
        }
        return any;
    }

    CompletableFuture<Boolean> expireMs(long ms) {
        return onEveryKey(k -> plain.pexpire(k, ms));
    }

    CompletableFuture<Boolean> expireAt(long unixMs) {
        return onEveryKey(k -> plain.pexpireat(k, unixMs));
    }

    CompletableFuture<Boolean> clearExpire() {
        return plain.persist(name);
    }

    // ---- the RRateLimiter proxy

    static RRateLimiter proxy(ModuleRateLimiter l) {
        return (RRateLimiter) Proxy.newProxyInstance(ModuleRateLimiter.class.getClassLoader(),
                new Class<?>[] { RRateLimiter.class }, (proxy, method, args) -> l.invoke(proxy, method,
                        args == null ? new Object[0] : args));
    }

    /**
     * An {@code RRateLimiter} method: its {@code *Async} form returns the operation's future as
     * Redisson's {@code RFuture} (completed on Lettuce's event loop, as Redisson's own complete
     * on its Netty threads); its synchronous form waits for the same future.
     */
    private Object invoke(Object proxy, Method m, Object[] a) throws Throwable {
        String n = m.getName();
        boolean async = n.endsWith("Async") && m.getReturnType().getName().equals("org.redisson.api.RFuture");
        String op = async ? n.substring(0, n.length() - 5) : n;
        CompletableFuture<?> f;
        try {
            f = start(proxy, op, a, m.getParameterTypes());
        }
        catch (RuntimeException e) {
            if (!async) {
                throw e;
            }
            f = CompletableFuture.failedFuture(e);
        }
        if (async) {
            @SuppressWarnings("unchecked")
            CompletableFuture<Object> o = (CompletableFuture<Object>) f;
            return new CompletableFutureWrapper<>(o);
        }
        try {
            return f.get();
        }
        catch (ExecutionException e) {
            Throwable cause = e.getCause();
            throw cause instanceof CompletionException && cause.getCause() != null ? cause.getCause() : cause;
        }
        catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new RedisException("RRateLimiter." + n + " interrupted", e);
        }
    }

    /** Starts the operation {@code n} (a method's name without {@code Async}). */
    private CompletableFuture<?> start(Object proxy, String n, Object[] a, Class<?>[] t) {
        switch (n) {
            case "trySetRate":
                return trySetRate((RateType) a[0], (Long) a[1], interval(a, t), keepAlive(a, t));
            case "setRate":
                if (a.length == 1) {
                    RateLimiterParams p = (RateLimiterParams) a[0];
                    return setRate(p.getMode(), p.getRate(), p.getRateInterval(), p.getKeepAliveTime(),
                            p.isKeepState());
                }
                return setRate((RateType) a[0], (Long) a[1], interval(a, t), keepAlive(a, t), false);
            case "updateRate":
                return updateRate((RateLimiterArgs) a[0]);
            case "getConfig":
                return getConfig();
            case "tryAcquire":
                return take(a.length > 0 && t[0] == long.class ? (Long) a[0] : 1, waitOf(a, t));
            case "acquire":
                return take(a.length > 0 ? (Long) a[0] : 1, 0).thenApply(x -> null);
            case "availablePermits":
                return availablePermits();
            case "release":
                return release((Long) a[0]);
            case "delete":
            case "unlink":
                return delete();
            case "isExists":
                return plain.exists(name);
            case "remainTimeToLive":
                return plain.pttl(name);
            case "getName":
                return CompletableFuture.completedFuture(name);
            case "clearExpire":
                return clearExpire();
            case "expire":
                if (a.length == 1 && a[0] instanceof Duration d) {
                    return expireMs(d.toMillis());
                }
                if (a.length == 1 && a[0] instanceof Instant i) {
                    return expireAt(i.toEpochMilli());
                }
                if (a.length == 2 && a[1] instanceof TimeUnit u) {
                    return expireMs(u.toMillis((Long) a[0]));
                }
                break;
            case "expireAt":
                if (a.length == 1 && a[0] instanceof java.util.Date d) {
                    return expireAt(d.getTime());
                }
                if (a.length == 1 && a[0] instanceof Long ms) {
                    return expireAt(ms);
                }
                break;
            case "toString":
                return CompletableFuture.completedFuture("redis-ratelimit RRateLimiter " + name);
            case "hashCode":
                return CompletableFuture.completedFuture(System.identityHashCode(proxy));
            case "equals":
                return CompletableFuture.completedFuture(proxy == a[0]);
            default:
                break;
        }
        throw new UnsupportedOperationException("RRateLimiter." + n + Arrays.toString(t)
                + " is not supported by the redis-ratelimit drop-in");
    }

    /** The interval of a {@code trySetRate}/{@code setRate} call: a Duration, or count + unit. */
    @SuppressWarnings("deprecation") // RateIntervalUnit: Redisson's deprecated overloads are still served
    private static Duration interval(Object[] a, Class<?>[] t) {
        if (t[2] == Duration.class) {
            return (Duration) a[2];
        }
        return Duration.ofMillis(((RateIntervalUnit) a[3]).toMillis((Long) a[2]));
    }

    private static Duration keepAlive(Object[] a, Class<?>[] t) {
        return t.length == 4 && t[3] == Duration.class ? (Duration) a[3] : null;
    }

    /** The longest wait of a {@code tryAcquire} overload: -1 for none. */
    private static long waitOf(Object[] a, Class<?>[] t) {
        List<Object> rest = new ArrayList<>(Arrays.asList(a));
        List<Class<?>> types = new ArrayList<>(Arrays.asList(t));
        if (!types.isEmpty() && types.get(types.size() - 1) == TimeUnit.class) {
            long ms = ((TimeUnit) rest.get(rest.size() - 1)).toMillis((Long) rest.get(rest.size() - 2));
            return ms <= 0 ? -1 : ms;
        }
        if (!types.isEmpty() && types.get(types.size() - 1) == Duration.class) {
            long ms = ((Duration) rest.get(rest.size() - 1)).toMillis();
            return ms <= 0 ? -1 : ms;
        }
        return -1;
    }
}

package io.github.redisratelimit;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import io.lettuce.core.AbstractRedisClient;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.cluster.RedisClusterClient;

/**
 * The typed client of the redis-ratelimit module over Lettuce: every command, one module
 * command per decision. This is the synchronous form; {@link #async()} and {@link #reactive()}
 * give the same calls as {@code CompletionStage}s and Reactor {@code Mono}s.
 *
 * <pre>{@code
 * try (RateLimitClient rl = RateLimitClient.create("redis://localhost:6379")) {
 *     Decision d = rl.limit("api:key42", Limit.token(100, 10, Duration.ofSeconds(1)));
 *     if (!d.allowed()) { ... d.retryAfterMs() ... }
 * }
 * }</pre>
 *
 * <p>Every limiting call carries {@code DEADLINE now + timeout} (plus its {@code WAIT}), and the
 * client stops waiting at the same instant: a call the server runs after its caller gave up
 * counts nothing ({@link DeadlineExceededException}). A call that may have counted is never
 * re-sent (see {@link LettuceTransport}). Errors are {@link RateLimitException}s that keep the
 * server's message.
 */
public final class RateLimitClient implements AutoCloseable {

    /** The default client-side timeout of a call (not counting a {@code WAIT}). */
    public static final Duration DEFAULT_TIMEOUT = Duration.ofSeconds(2);

    private final Runner runner;
    private final AsyncRateLimitClient async;
    private final ReactiveRateLimitClient reactive;

    /**
     * A client over any transport.
     *
     * @param transport the transport (closed with this client)
     * @param timeout   the client-side timeout of a call, not counting its {@code WAIT}
     */
    public RateLimitClient(Transport transport, Duration timeout) {
        this.runner = new Runner(transport, timeout);
        this.async = new AsyncRateLimitClient(runner);
        this.reactive = new ReactiveRateLimitClient(runner);
    }

    /**
     * A client of its own for a standalone server, closed with it.
     *
     * @param uri e.g. {@code redis://localhost:6379}
     * @return the client
     */
    public static RateLimitClient create(String uri) {
        return new RateLimitClient(LettuceTransport.of(RedisClient.create(RedisURI.create(uri)), true),
                DEFAULT_TIMEOUT);
    }

    /**
     * A client of its own for a cluster (each call goes to its key's node), closed with it.
     *
     * @param seeds one or more nodes' URIs
     * @return the client
     */
    public static RateLimitClient createCluster(String... seeds) {
        List<RedisURI> uris = java.util.Arrays.stream(seeds).map(RedisURI::create).toList();
        return new RateLimitClient(LettuceTransport.of(RedisClusterClient.create(uris), true), DEFAULT_TIMEOUT);
    }

    /**
     * A client over the application's Lettuce client (not shut down on {@link #close()}).
     *
     * @param client  the standalone client
     * @param timeout the client-side timeout of a call
     * @return the client
     */
    public static RateLimitClient of(RedisClient client, Duration timeout) {
        return new RateLimitClient(LettuceTransport.of(client, false), timeout);
    }

    /**
     * A client over the application's Lettuce cluster client (not shut down on {@link #close()}).
     *
     * @param client  the cluster client
     * @param timeout the client-side timeout of a call
     * @return the client
     */
    public static RateLimitClient of(RedisClusterClient client, Duration timeout) {
        return new RateLimitClient(LettuceTransport.of(client, false), timeout);
    }

    /**
     * A client over the application's Lettuce client of either kind (Spring's
     * {@code LettuceConnectionFactory.getNativeClient()}), not shut down on {@link #close()}.
     *
     * @param client  a {@link RedisClient} or a {@link RedisClusterClient}
     * @param timeout the client-side timeout of a call
     * @return the client
     */
    public static RateLimitClient of(AbstractRedisClient client, Duration timeout) {
        if (client instanceof RedisClusterClient cluster) {
            return of(cluster, timeout);
        }
        if (client instanceof RedisClient standalone) {
            return of(standalone, timeout);
        }
        throw new IllegalArgumentException("unsupported Lettuce client " + client.getClass().getName());
    }

    /** @return the same calls as {@code CompletionStage}s */
    public AsyncRateLimitClient async() {
        return async;
    }

    /** @return the same calls as Reactor {@code Mono}s */
    public ReactiveRateLimitClient reactive() {
        return reactive;
    }

    /** @return the client-side timeout of a call */
    public Duration timeout() {
        return runner.timeout();
    }

    /** Closes the connections (and the Lettuce client if this client created it). */
    @Override
    public void close() {
        runner.transport().close();
    }

    /**
     * Judges one request of cost 1 against {@code limit} on {@code key} ({@code RL.TOKEN}, {@code RL.PERIOD}, {@code RL.SLIDE}, {@code RL.LEAKY}, or {@code RL.HIT} for a policy).
     *
     * @param key the key
     * @param limit the limit
     * @return the decision
     */
    public Decision limit(String key, Limit limit) {
        return runner.sync(RateLimitCommands.limit(key, limit, Options.DEFAULT));
    }

    /**
     * Judges one request with {@code options} (cost, {@code ATMOST}, ban, {@code WAIT}, dry run, …).
     *
     * @param key the key
     * @param limit the limit
     * @param options the call's options
     * @return the decision
     */
    public Decision limit(String key, Limit limit, Options options) {
        return runner.sync(RateLimitCommands.limit(key, limit, options));
    }

    /**
     * Judges {@code key} by the server's policy {@code policy} ({@code RL.HIT}).
     *
     * @param policy the policy's name
     * @param key the key
     * @param options the call's options (ban and FRESH do not apply)
     * @return the decision
     */
    public Decision hit(String policy, String key, Options options) {
        return runner.sync(RateLimitCommands.limit(key, Limit.policy(policy), options));
    }

    /**
     * redis-cell's {@code CL.THROTTLE}: GCRA, {@code count} per {@code periodSeconds}, burst {@code maxBurst}; times in the decision are its whole seconds in ms.
     *
     * @param key the key
     * @param maxBurst the burst tolerance
     * @param count permits per period
     * @param periodSeconds the period in seconds
     * @param quantity the cost (0 peeks)
     * @return the decision
     */
    public Decision throttle(String key, long maxBurst, long count, long periodSeconds, long quantity) {
        return runner.sync(RateLimitCommands.throttle(key, maxBurst, count, periodSeconds, quantity));
    }

    /**
     * Several limits, all or nothing, in one atomic call ({@code RL.ALL}).
     *
     * @param parts the keys and their limits
     * @param options DRYRUN / AT (cost is per part)
     * @return the binding decision and each limit's
     */
    public AllDecision all(List<Part> parts, Options options) {
        return runner.sync(RateLimitCommands.all(parts, options));
    }

    /**
     * Gives {@code count} permits back ({@code RL.REFUND}), never beyond a fresh limiter.
     *
     * @param key the key
     * @param count permits to give back
     * @return the standing after the refund, empty for a missing key
     */
    public Optional<Decision> refund(String key, long count) {
        return runner.sync(RateLimitCommands.refund(key, count));
    }

    /**
     * Takes {@code count} permits past the limit as a debt ({@code RL.CHARGE}).
     *
     * @param key the key
     * @param count permits to take
     * @return the standing after the charge, empty for a missing key
     */
    public Optional<Decision> charge(String key, long count) {
        return runner.sync(RateLimitCommands.charge(key, count));
    }

    /**
     * Takes a lease of a concurrency limit ({@code RL.ACQUIRE}); with the id of a held lease, renews it.
     *
     * @param key the key
     * @param limit leases held at once
     * @param lease how long a lease lasts without renewal
     * @param id the lease's id, or null for one the server assigns
     * @param options WAIT, DRYRUN, AT
     * @return the lease
     */
    public Lease acquire(String key, long limit, Duration lease, String id, Options options) {
        return runner.sync(RateLimitCommands.acquire(key, limit, lease, id, options));
    }

    /**
     * Gives a lease back ({@code RL.RELEASE}).
     *
     * @param key the key
     * @param id the lease's id
     * @return whether the lease was held
     */
    public boolean release(String key, String id) {
        return runner.sync(RateLimitCommands.release(key, id));
    }

    /**
     * The answer a dry run of cost 1 with the stored parameters would get ({@code RL.PEEK}).
     *
     * @param key the key
     * @return the standing, empty for a missing key
     */
    public Optional<Decision> peek(String key) {
        return runner.sync(RateLimitCommands.peek(key));
    }

    /**
     * The stored parameters and state ({@code RL.INFO}).
     *
     * @param key the key
     * @return the fields, empty for a missing key
     */
    public Optional<Map<String, Object>> info(String key) {
        return runner.sync(RateLimitCommands.info(key));
    }

    /**
     * Defines or replaces the server policy {@code name} ({@code RL.POLICY SET}).
     *
     * @param name the policy's name
     * @param limit its algorithm and parameters
     * @param shadow judge without refusing
     * @return true once set
     */
    public boolean policySet(String name, Limit limit, boolean shadow) {
        return runner.sync(RateLimitCommands.policySet(name, limit, shadow));
    }

    /**
     * The server policy's definition ({@code RL.POLICY GET}).
     *
     * @param name the policy's name
     * @return the raw definition, null when none
     */
    public Object policyGet(String name) {
        return runner.sync(RateLimitCommands.policyGet(name));
    }

    /**
     * Deletes the server policy {@code name} ({@code RL.POLICY DEL}).
     *
     * @param name the policy's name
     * @return whether it existed
     */
    public boolean policyDel(String name) {
        return runner.sync(RateLimitCommands.policyDel(name));
    }

    /**
     * The keys refused most often now on the node ({@code RL.TOP}).
     *
     * @param count how many
     * @param policy only refusals through this policy, or null
     * @return the keys, most refused first
     */
    public List<TopEntry> top(int count, String policy) {
        return runner.sync(RateLimitCommands.top(count, policy));
    }
}

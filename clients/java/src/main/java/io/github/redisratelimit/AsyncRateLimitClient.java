package io.github.redisratelimit;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletionStage;

/**
 * The asynchronous form of {@link RateLimitClient}: the same calls, as {@link CompletionStage}s
 * that complete with the decision or a {@link RateLimitException}.
 */
public final class AsyncRateLimitClient {

    private final Runner runner;

    AsyncRateLimitClient(Runner runner) {
        this.runner = runner;
    }

    /**
     * Judges one request of cost 1 against {@code limit} on {@code key} ({@code RL.TOKEN}, {@code RL.PERIOD}, {@code RL.SLIDE}, {@code RL.LEAKY}, or {@code RL.HIT} for a policy).
     *
     * @param key the key
     * @param limit the limit
     * @return the decision
     */
    public CompletionStage<Decision> limit(String key, Limit limit) {
        return runner.run(RateLimitCommands.limit(key, limit, Options.DEFAULT));
    }

    /**
     * Judges one request with {@code options} (cost, {@code ATMOST}, ban, {@code WAIT}, dry run, …).
     *
     * @param key the key
     * @param limit the limit
     * @param options the call's options
     * @return the decision
     */
    public CompletionStage<Decision> limit(String key, Limit limit, Options options) {
        return runner.run(RateLimitCommands.limit(key, limit, options));
    }

    /**
     * Judges {@code key} by the server's policy {@code policy} ({@code RL.HIT}).
     *
     * @param policy the policy's name
     * @param key the key
     * @param options the call's options (ban and FRESH do not apply)
     * @return the decision
     */
    public CompletionStage<Decision> hit(String policy, String key, Options options) {
        return runner.run(RateLimitCommands.limit(key, Limit.policy(policy), options));
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
    public CompletionStage<Decision> throttle(String key, long maxBurst, long count, long periodSeconds, long quantity) {
        return runner.run(RateLimitCommands.throttle(key, maxBurst, count, periodSeconds, quantity));
    }

    /**
     * Several limits, all or nothing, in one atomic call ({@code RL.ALL}).
     *
     * @param parts the keys and their limits
     * @param options DRYRUN / AT (cost is per part)
     * @return the binding decision and each limit's
     */
    public CompletionStage<AllDecision> all(List<Part> parts, Options options) {
        return runner.run(RateLimitCommands.all(parts, options));
    }

    /**
     * Gives {@code count} permits back ({@code RL.REFUND}), never beyond a fresh limiter.
     *
     * @param key the key
     * @param count permits to give back
     * @return the standing after the refund, empty for a missing key
     */
    public CompletionStage<Optional<Decision>> refund(String key, long count) {
        return runner.run(RateLimitCommands.refund(key, count));
    }

    /**
     * Takes {@code count} permits past the limit as a debt ({@code RL.CHARGE}).
     *
     * @param key the key
     * @param count permits to take
     * @return the standing after the charge, empty for a missing key
     */
    public CompletionStage<Optional<Decision>> charge(String key, long count) {
        return runner.run(RateLimitCommands.charge(key, count));
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
    public CompletionStage<Lease> acquire(String key, long limit, Duration lease, String id, Options options) {
        return runner.run(RateLimitCommands.acquire(key, limit, lease, id, options));
    }

    /**
     * Gives a lease back ({@code RL.RELEASE}).
     *
     * @param key the key
     * @param id the lease's id
     * @return whether the lease was held
     */
    public CompletionStage<Boolean> release(String key, String id) {
        return runner.run(RateLimitCommands.release(key, id));
    }

    /**
     * The answer a dry run of cost 1 with the stored parameters would get ({@code RL.PEEK}).
     *
     * @param key the key
     * @return the standing, empty for a missing key
     */
    public CompletionStage<Optional<Decision>> peek(String key) {
        return runner.run(RateLimitCommands.peek(key));
    }

    /**
     * The stored parameters and state ({@code RL.INFO}).
     *
     * @param key the key
     * @return the fields, empty for a missing key
     */
    public CompletionStage<Optional<Map<String, Object>>> info(String key) {
        return runner.run(RateLimitCommands.info(key));
    }

    /**
     * Defines or replaces the server policy {@code name} ({@code RL.POLICY SET}).
     *
     * @param name the policy's name
     * @param limit its algorithm and parameters
     * @param shadow judge without refusing
     * @return true once set
     */
    public CompletionStage<Boolean> policySet(String name, Limit limit, boolean shadow) {
        return runner.run(RateLimitCommands.policySet(name, limit, shadow));
    }

    /**
     * The server policy's definition ({@code RL.POLICY GET}).
     *
     * @param name the policy's name
     * @return the raw definition, null when none
     */
    public CompletionStage<Object> policyGet(String name) {
        return runner.run(RateLimitCommands.policyGet(name));
    }

    /**
     * Deletes the server policy {@code name} ({@code RL.POLICY DEL}).
     *
     * @param name the policy's name
     * @return whether it existed
     */
    public CompletionStage<Boolean> policyDel(String name) {
        return runner.run(RateLimitCommands.policyDel(name));
    }

    /**
     * The keys refused most often now on the node ({@code RL.TOP}).
     *
     * @param count how many
     * @param policy only refusals through this policy, or null
     * @return the keys, most refused first
     */
    public CompletionStage<List<TopEntry>> top(int count, String policy) {
        return runner.run(RateLimitCommands.top(count, policy));
    }
}

package io.github.redisratelimit;

import java.time.Duration;
import java.util.List;

/**
 * The options of one limiting call: its cost ({@code COST} or {@code ATMOST}), a ban, waiting on
 * the server ({@code WAIT}), a dry run, an evaluation instant ({@code AT}), {@code FRESH}.
 * Immutable; start from {@link #DEFAULT} or {@link #cost(long)}.
 *
 * <p>Every limiting call also carries {@code DEADLINE now + timeout} (the client's command
 * timeout plus any wait), so a call that reaches the server after its caller gave up counts
 * nothing.
 */
public final class Options {

    /** Cost 1, no other option. */
    public static final Options DEFAULT = new Options(1, -1, 0, false, -1, false, -1, false);

    private final long cost;
    private final long atMost;
    private final long banMs;
    private final boolean banClear;
    private final long waitMs;
    private final boolean dryRun;
    private final long atMs;
    private final boolean fresh;

    private Options(long cost, long atMost, long banMs, boolean banClear, long waitMs, boolean dryRun, long atMs,
            boolean fresh) {
        this.cost = cost;
        this.atMost = atMost;
        this.banMs = banMs;
        this.banClear = banClear;
        this.waitMs = waitMs;
        this.dryRun = dryRun;
        this.atMs = atMs;
        this.fresh = fresh;
    }

    /**
     * @param cost permits the request takes (0 peeks)
     * @return options with that cost
     */
    public static Options cost(long cost) {
        return DEFAULT.withCost(cost);
    }

    /**
     * @param cost permits the request takes (0 peeks)
     * @return these options with that cost
     */
    public Options withCost(long cost) {
        if (cost < 0) {
            throw new IllegalArgumentException("cost must be >= 0: " + cost);
        }
        return new Options(cost, -1, banMs, banClear, waitMs, dryRun, atMs, fresh);
    }

    /**
     * @param n at most this many permits: take what is left ({@code ATMOST n})
     * @return these options taking up to n
     */
    public Options atMost(long n) {
        if (n < 0) {
            throw new IllegalArgumentException("atMost must be >= 0: " + n);
        }
        return new Options(1, n, banMs, banClear, waitMs, dryRun, atMs, fresh);
    }

    /**
     * @param ban   a refusal starts a ban this long ({@code BAN d})
     * @param clear the ban also clears the limiter ({@code CLEAR})
     * @return these options with the ban
     */
    public Options ban(Duration ban, boolean clear) {
        return new Options(cost, atMost, ban.toMillis(), clear, waitMs, dryRun, atMs, fresh);
    }

    /**
     * @param timeout wait on the server, in arrival order, up to this long ({@code WAIT}); zero
     *                waits without limit
     * @return these options with the wait
     */
    public Options waitFor(Duration timeout) {
        return new Options(cost, atMost, banMs, banClear, timeout.toMillis(), dryRun, atMs, fresh);
    }

    /** @return these options as a dry run: the answer, nothing changed */
    public Options dryRun() {
        return new Options(cost, atMost, banMs, banClear, waitMs, true, atMs, fresh);
    }

    /**
     * @param unixMs evaluate at this instant instead of the server clock
     * @return these options with {@code AT}
     */
    public Options at(long unixMs) {
        return new Options(cost, atMost, banMs, banClear, waitMs, dryRun, unixMs, fresh);
    }

    /** @return these options judging against a fresh limiter ({@code FRESH}) */
    public Options fresh() {
        return new Options(cost, atMost, banMs, banClear, waitMs, dryRun, atMs, true);
    }

    /** @return the cost */
    public long cost() {
        return cost;
    }

    /** @return the {@code WAIT} timeout in ms, {@code -1} without waiting, 0 without limit */
    public long waitMs() {
        return waitMs;
    }

    void append(List<String> args, boolean direct) {
        if (atMost >= 0) {
            args.add("ATMOST");
            args.add(Long.toString(atMost));
        }
        else if (cost != 1) {
            args.add("COST");
            args.add(Long.toString(cost));
        }
        if (direct && banMs > 0) {
            args.add("BAN");
            args.add(banMs + "ms");
            if (banClear) {
                args.add("CLEAR");
            }
        }
        if (waitMs >= 0) {
            args.add("WAIT");
            args.add(waitMs + "ms");
        }
        if (dryRun) {
            args.add("DRYRUN");
        }
        if (atMs >= 0) {
            args.add("AT");
            args.add(Long.toString(atMs));
        }
        if (direct && fresh) {
            args.add("FRESH");
        }
    }
}

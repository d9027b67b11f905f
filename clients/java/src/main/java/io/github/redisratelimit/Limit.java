package io.github.redisratelimit;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Objects;

/**
 * One limit: an algorithm and its parameters (the module's {@code RL.TOKEN}, {@code RL.PERIOD},
 * {@code RL.SLIDE}, {@code RL.LEAKY}), or a server policy by name. Immutable; the option methods
 * return a new limit.
 *
 * <pre>{@code
 * Limit.token(100, 10, Duration.ofSeconds(1))          // 100 burst, 10/s
 * Limit.period(1000, Duration.ofDays(1)).align()       // 1000 per UTC day
 * Limit.slide(100, Duration.ofMinutes(1)).buckets(60)  // any rolling minute, 60 counters
 * Limit.policy("free")                                 // the server's policy "free"
 * }</pre>
 */
public final class Limit {

    /** The algorithm of a limit. */
    public enum Kind {
        /** Token bucket ({@code RL.TOKEN}). */
        TOKEN(Command.TOKEN),
        /** Fixed window ({@code RL.PERIOD}). */
        PERIOD(Command.PERIOD),
        /** Sliding window ({@code RL.SLIDE}). */
        SLIDE(Command.SLIDE),
        /** Leaky bucket ({@code RL.LEAKY}). */
        LEAKY(Command.LEAKY),
        /** A server policy ({@code RL.HIT}). */
        POLICY(Command.HIT);

        final Command command;

        Kind(Command command) {
            this.command = command;
        }
    }

    private final Kind kind;
    private final String policy;
    private final long amount;
    private final long rate;
    private final long periodMs;
    private final List<String> options;

    private Limit(Kind kind, String policy, long amount, long rate, long periodMs, List<String> options) {
        this.kind = kind;
        this.policy = policy;
        this.amount = amount;
        this.rate = rate;
        this.periodMs = periodMs;
        this.options = Collections.unmodifiableList(options);
    }

    /**
     * A token bucket of {@code capacity} tokens gaining {@code rate} tokens every {@code period}.
     *
     * @param capacity the burst
     * @param rate     tokens per period
     * @param period   the refill period (whole ms)
     * @return the limit
     */
    public static Limit token(long capacity, long rate, Duration period) {
        return new Limit(Kind.TOKEN, null, capacity, rate, ms(period), List.of());
    }

    /**
     * A fixed window: at most {@code limit} per {@code period}.
     *
     * @param limit  permits per window
     * @param period the window
     * @return the limit
     */
    public static Limit period(long limit, Duration period) {
        return new Limit(Kind.PERIOD, null, limit, 0, ms(period), List.of());
    }

    /**
     * A sliding window: at most {@code limit} in any {@code window}.
     *
     * @param limit  permits per window
     * @param window the window
     * @return the limit
     */
    public static Limit slide(long limit, Duration window) {
        return new Limit(Kind.SLIDE, null, limit, 0, ms(window), List.of());
    }

    /**
     * A leaky bucket of {@code capacity} draining {@code rate} per {@code period} (delay mode; see
     * {@link #nodelay()}).
     *
     * @param capacity the bucket's size
     * @param rate     units drained per period
     * @param period   the drain period
     * @return the limit
     */
    public static Limit leaky(long capacity, long rate, Duration period) {
        return new Limit(Kind.LEAKY, null, capacity, rate, ms(period), List.of());
    }

    /**
     * The server's policy {@code name} ({@code RL.POLICY SET}), judged with {@code RL.HIT}.
     *
     * @param name the policy's name
     * @return the limit
     */
    public static Limit policy(String name) {
        return new Limit(Kind.POLICY, Objects.requireNonNull(name, "name"), 0, 0, 0, List.of());
    }

    private Limit with(Kind only, String... opts) {
        if (kind != only) {
            throw new IllegalArgumentException(String.join(" ", opts) + " is an option of " + only + " limits, not "
                    + kind);
        }
        List<String> o = new ArrayList<>(options);
        for (String opt : opts) {
            o.add(opt);
        }
        return new Limit(kind, policy, amount, rate, periodMs, o);
    }

    /** @return this token bucket with {@code STEP} refill (whole tokens at each period) */
    public Limit step() {
        return with(Kind.TOKEN, "STEP");
    }

    /** @return this fixed window on UTC calendar boundaries ({@code ALIGN}) */
    public Limit align() {
        return with(Kind.PERIOD, "ALIGN");
    }

    /**
     * @param utcOffset the offset of the local calendar, e.g. {@code Duration.ofHours(8)}
     * @return this fixed window on that calendar's boundaries ({@code ALIGN offset})
     */
    public Limit align(Duration utcOffset) {
        return with(Kind.PERIOD, "ALIGN", utcOffset.toMillis() + "ms");
    }

    /** @return this fixed window keeping a live window's period ({@code KEEPPERIOD}) */
    public Limit keepPeriod() {
        return with(Kind.PERIOD, "KEEPPERIOD");
    }

    /**
     * @param buckets the number of counters (1 … 1000, dividing the window)
     * @return this sliding window with counters instead of an exact log ({@code BUCKETS b})
     */
    public Limit buckets(int buckets) {
        return with(Kind.SLIDE, "BUCKETS", Integer.toString(buckets));
    }

    /** @return this bucketed sliding window with its grid anchored at the first call */
    public Limit anchor() {
        return with(Kind.SLIDE, "ANCHOR");
    }

    /** @return this bucketed sliding window judged on its estimate rounded down */
    public Limit floor() {
        return with(Kind.SLIDE, "FLOOR");
    }

    /** @return this leaky bucket as a meter: admitted requests proceed at once */
    public Limit nodelay() {
        return with(Kind.LEAKY, "NODELAY");
    }

    /**
     * @param delay units of water tolerated ahead without delay
     * @return this leaky bucket with {@code DELAY d}
     */
    public Limit delay(long delay) {
        return with(Kind.LEAKY, "DELAY", Long.toString(delay));
    }

    /** @return the algorithm */
    public Kind kind() {
        return kind;
    }

    /** @return the limit or capacity (0 for a policy) */
    public long amount() {
        return amount;
    }

    /** @return the period or window in ms (0 for a policy) */
    public long periodMs() {
        return periodMs;
    }

    /** @return the policy's name, or null */
    public String policyName() {
        return policy;
    }

    /** The parameters after the key, as the single command takes them. */
    void appendParams(List<String> args) {
        switch (kind) {
            case TOKEN, LEAKY -> {
                args.add(Long.toString(amount));
                args.add(Long.toString(rate));
                args.add(periodMs + "ms");
            }
            case PERIOD, SLIDE -> {
                args.add(Long.toString(amount));
                args.add(periodMs + "ms");
            }
            case POLICY -> {
                // RL.HIT name key: the name comes first, see RateLimitCommands
            }
        }
        args.addAll(options);
    }

    /** The {@code RL.ALL} group of this limit: {@code TOKEN capacity rate period …}. */
    void appendGroup(List<String> args) {
        if (kind == Kind.POLICY) {
            args.add("POLICY");
            args.add(policy);
            return;
        }
        args.add(kind.name());
        appendParams(args);
    }

    private static long ms(Duration d) {
        long ms = d.toMillis();
        if (ms < 1) {
            throw new IllegalArgumentException("a period must be at least 1 ms: " + d);
        }
        return ms;
    }

    @Override
    public String toString() {
        List<String> a = new ArrayList<>();
        appendGroup(a);
        return String.join(" ", a);
    }
}

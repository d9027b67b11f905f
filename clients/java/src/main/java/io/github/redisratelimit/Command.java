package io.github.redisratelimit;

import java.nio.charset.StandardCharsets;

import io.lettuce.core.protocol.ProtocolKeyword;

/**
 * The module's commands, as Lettuce {@link ProtocolKeyword}s for {@code dispatch}.
 * {@link #counts()} tells whether a call may have changed a limiter: such a call is never
 * re-sent by the client (Lettuce's replay on reconnect is filtered out for it).
 */
@SuppressWarnings("deprecation") // Enum.name() implements ProtocolKeyword.name(), deprecated in Lettuce 6.8
public enum Command implements ProtocolKeyword {
    /** Token bucket. */
    TOKEN("RL.TOKEN", true),
    /** Fixed window. */
    PERIOD("RL.PERIOD", true),
    /** Sliding window. */
    SLIDE("RL.SLIDE", true),
    /** Leaky bucket. */
    LEAKY("RL.LEAKY", true),
    /** GCRA, redis-cell's arguments. */
    THROTTLE("CL.THROTTLE", true),
    /** Several limits, all or nothing. */
    ALL("RL.ALL", true),
    /** A key judged by a server policy. */
    HIT("RL.HIT", true),
    /** Permits given back. */
    REFUND("RL.REFUND", true),
    /** Permits taken past the limit. */
    CHARGE("RL.CHARGE", true),
    /** A concurrency lease. */
    ACQUIRE("RL.ACQUIRE", true),
    /** A lease given back. */
    RELEASE("RL.RELEASE", true),
    /** Read-only standing of a key. */
    PEEK("RL.PEEK", false),
    /** Read-only parameters and state of a key. */
    INFO("RL.INFO", false),
    /** Server policies. */
    POLICY("RL.POLICY", false),
    /** The keys refused most often. */
    TOP("RL.TOP", false);

    private final String name;
    private final byte[] bytes;
    private final boolean counts;

    Command(String name, boolean counts) {
        this.name = name;
        this.bytes = name.getBytes(StandardCharsets.US_ASCII);
        this.counts = counts;
    }

    /** @return the command's name as the server knows it, e.g. {@code RL.TOKEN} */
    public String commandName() {
        return name;
    }

    /** @return whether a call may change a limiter (and so must never be re-sent) */
    public boolean counts() {
        return counts;
    }

    @Override
    public byte[] getBytes() {
        return bytes.clone();
    }

    @Override
    public String toString() {
        return name;
    }
}

package io.github.redisratelimit;

import java.util.List;

/**
 * The answer of {@code RL.ACQUIRE}: the decision and the lease's id (null when refused or under a
 * dry run). Give the id to {@code release}, or acquire again with it to renew the lease.
 *
 * @param decision the standing after the call
 * @param id       the lease's id, or null
 */
public record Lease(Decision decision, String id) {

    /** @return whether a lease is held */
    public boolean acquired() {
        return decision.allowed();
    }

    static Lease of(Object reply) {
        List<?> r = Replies.list(reply, "an RL.ACQUIRE reply");
        return new Lease(Decision.of(r.subList(0, 5)), r.size() > 5 && r.get(5) instanceof String s ? s : null);
    }
}

package io.github.redisratelimit;

import java.util.ArrayList;
import java.util.List;

/**
 * The answer of {@code RL.ALL}: the binding limit's decision, its index (0-based, in the order
 * given) and, for each limit, the answer its single command would give.
 *
 * @param decision the binding limit's answer (refused: the refusing limit with the longest wait;
 *                 admitted: the one with the fewest permits left)
 * @param index    the binding limit's index, 0-based (the server answers 1-based)
 * @param details  each limit's answer
 */
public record AllDecision(Decision decision, int index, List<Decision> details) {

    /** @return whether every limit admitted the call */
    public boolean allowed() {
        return decision.allowed();
    }

    static AllDecision of(Object reply) {
        List<?> r = Replies.list(reply, "an RL.ALL reply");
        if (r.size() < 7) {
            throw new RateLimitException("unexpected RL.ALL reply: " + reply);
        }
        List<Decision> details = new ArrayList<>();
        for (Object d : Replies.list(r.get(6), "RL.ALL details")) {
            details.add(Decision.of(d));
        }
        return new AllDecision(Decision.of(r.subList(0, 5)), (int) Replies.num(r.get(5)) - 1, List.copyOf(details));
    }
}

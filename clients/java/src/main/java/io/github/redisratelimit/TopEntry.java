package io.github.redisratelimit;

import java.util.ArrayList;
import java.util.List;

/**
 * One line of {@code RL.TOP}: a key refused often on this node.
 *
 * @param key           the key (its first 128 bytes)
 * @param refused       how many calls on it were refused in the last one to two windows
 * @param lastRefusedMs the unix ms of the last refusal
 */
public record TopEntry(String key, long refused, long lastRefusedMs) {

    static List<TopEntry> list(Object reply) {
        List<TopEntry> out = new ArrayList<>();
        for (Object e : Replies.list(reply, "an RL.TOP reply")) {
            List<?> t = Replies.list(e, "an RL.TOP entry");
            out.add(new TopEntry(String.valueOf(t.get(0)), Replies.num(t.get(1)), Replies.num(t.get(2))));
        }
        return List.copyOf(out);
    }
}

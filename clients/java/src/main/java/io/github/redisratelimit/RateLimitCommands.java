package io.github.redisratelimit;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * Builds the module's calls and their reply parsers: the one place that knows each command's
 * syntax (docs/commands.md). The sync, async and reactive clients run what it builds.
 */
final class RateLimitCommands {

    private RateLimitCommands() {
    }

    static Request<Decision> limit(String key, Limit limit, Options opts) {
        Objects.requireNonNull(key, "key");
        List<String> a = new ArrayList<>();
        int keyIndex = 0;
        if (limit.kind() == Limit.Kind.POLICY) {
            a.add(limit.policyName());
            keyIndex = 1;
        }
        a.add(key);
        limit.appendParams(a);
        opts.append(a, limit.kind() != Limit.Kind.POLICY);
        return new Request<>(limit.kind().command, a, keyIndex, opts.waitMs(), true, Decision::of);
    }

    static Request<Decision> throttle(String key, long maxBurst, long count, long periodSeconds, long quantity) {
        List<String> a = List.of(key, Long.toString(maxBurst), Long.toString(count), Long.toString(periodSeconds),
                Long.toString(quantity));
        return new Request<>(Command.THROTTLE, a, 0, -1, true, reply -> {
            List<?> r = Replies.list(reply, "a CL.THROTTLE reply");
            boolean allowed = Replies.num(r.get(0)) == 0;
            long retry = Replies.num(r.get(3));
            return new Decision(allowed, Replies.num(r.get(1)), Replies.num(r.get(2)),
                    allowed ? 0 : retry < 0 ? -1 : retry * 1000, Replies.num(r.get(4)) * 1000);
        });
    }

    static Request<AllDecision> all(List<Part> parts, Options opts) {
        if (parts.isEmpty()) {
            throw new IllegalArgumentException("RL.ALL needs at least one limit");
        }
        List<String> a = new ArrayList<>();
        a.add(Integer.toString(parts.size()));
        for (Part p : parts) {
            a.add(p.key());
        }
        for (Part p : parts) {
            p.limit().appendGroup(a);
            if (p.cost() != 1) {
                a.add("COST");
                a.add(Long.toString(p.cost()));
            }
            if (p.shadow()) {
                a.add("SHADOW");
            }
        }
        opts.append(a, false);
        return new Request<>(Command.ALL, a, 1, -1, true, AllDecision::of);
    }

    static Request<Optional<Decision>> refund(String key, long count) {
        return new Request<>(Command.REFUND, List.of(key, Long.toString(count)), 0, -1, false,
                RateLimitCommands::optionalDecision);
    }

    static Request<Optional<Decision>> charge(String key, long count) {
        return new Request<>(Command.CHARGE, List.of(key, Long.toString(count)), 0, -1, false,
                RateLimitCommands::optionalDecision);
    }

    static Request<Lease> acquire(String key, long limit, Duration lease, String id, Options opts) {
        List<String> a = new ArrayList<>(List.of(key, Long.toString(limit), lease.toMillis() + "ms"));
        if (id != null) {
            a.add("ID");
            a.add(id);
        }
        opts.withCost(1).append(a, false);
        return new Request<>(Command.ACQUIRE, a, 0, opts.waitMs(), true, Lease::of);
    }

    static Request<Boolean> release(String key, String id) {
        return new Request<>(Command.RELEASE, List.of(key, id), 0, -1, false, r -> Replies.num(single(r)) == 1);
    }

    static Request<Optional<Decision>> peek(String key) {
        return new Request<>(Command.PEEK, List.of(key), 0, -1, false, RateLimitCommands::optionalDecision);
    }

    static Request<Optional<Map<String, Object>>> info(String key) {
        return new Request<>(Command.INFO, List.of(key), 0, -1, false, r -> {
            Object v = nilOrArray(r);
            if (v == null) {
                return Optional.empty();
            }
            List<?> l = Replies.list(v, "an RL.INFO reply");
            Map<String, Object> m = new java.util.LinkedHashMap<>();
            for (int i = 0; i + 1 < l.size(); i += 2) {
                m.put(String.valueOf(l.get(i)), l.get(i + 1));
            }
            return Optional.of(m);
        });
    }

    static Request<Boolean> policySet(String name, Limit limit, boolean shadow) {
        if (limit.kind() == Limit.Kind.POLICY) {
            throw new IllegalArgumentException("a policy is defined by an algorithm, not another policy");
        }
        List<String> a = new ArrayList<>(List.of("SET", name));
        limit.appendGroup(a);
        if (shadow) {
            a.add("SHADOW");
        }
        return new Request<>(Command.POLICY, a, -1, -1, false, r -> "OK".equals(single(r)));
    }

    static Request<Boolean> policyDel(String name) {
        return new Request<>(Command.POLICY, List.of("DEL", name), -1, -1, false, r -> Replies.num(single(r)) >= 1);
    }

    static Request<Object> policyGet(String name) {
        return new Request<>(Command.POLICY, List.of("GET", name), -1, -1, false, RateLimitCommands::nilOrArray);
    }

    static Request<List<TopEntry>> top(int count, String policy) {
        List<String> a = new ArrayList<>(List.of("COUNT", Integer.toString(count)));
        if (policy != null) {
            a.add("POLICY");
            a.add(policy);
        }
        return new Request<>(Command.TOP, a, -1, -1, false, TopEntry::list);
    }

    private static Optional<Decision> optionalDecision(Object reply) {
        Object v = nilOrArray(reply);
        return v == null ? Optional.empty() : Optional.of(Decision.of(v));
    }

    /**
     * An array reply is read as its list; a single value (Lettuce's {@code ArrayOutput} wraps it
     * in a one-element list) as that value.
     */
    static Object single(Object reply) {
        if (reply instanceof List<?> l && l.size() == 1 && !(l.get(0) instanceof List)) {
            return l.get(0);
        }
        return reply;
    }

    private static Object nilOrArray(Object reply) {
        if (reply == null) {
            return null;
        }
        if (reply instanceof List<?> l && l.size() == 1 && l.get(0) == null) {
            return null;
        }
        return reply;
    }
}

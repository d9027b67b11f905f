package io.github.redisratelimit.metrics;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Supplier;
import java.util.function.ToDoubleFunction;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.binder.MeterBinder;

/**
 * Micrometer meters of the module's {@code INFO ratelimit} counters, named so that Prometheus
 * sees the names the other packages' collectors export: {@code ratelimit_up},
 * {@code ratelimit_decisions_total{command,outcome}}, {@code ratelimit_calls_total{command}},
 * {@code ratelimit_errors_total{command}}, {@code ratelimit_waiting},
 * {@code ratelimit_wait_admitted_total}, {@code ratelimit_wait_timeouts_total},
 * {@code ratelimit_top_refusals}, {@code ratelimit_top_error_bound}, and per server policy
 * ({@code RL.POLICY}; a policy defined later gets its meters at the first read that shows it)
 * {@code ratelimit_policy_decisions_total{policy,outcome}} and, with a candidate,
 * {@code ratelimit_policy_candidate_decisions_total{policy,outcome}}. One {@code INFO} per scrape
 * at most every {@code maxAgeMs} (the meters share the snapshot); a failed read sets
 * {@code ratelimit_up} to 0 and keeps the counters' last values.
 *
 * <pre>{@code
 * StatefulRedisConnection<String, String> c = redisClient.connect();
 * RateLimitMeters meters = new RateLimitMeters(() -> c.sync().info("ratelimit"), 1000);
 * meters.bindTo(meterRegistry);   // keep a reference: Micrometer holds the meters' source weakly
 * }</pre>
 */
public final class RateLimitMeters implements MeterBinder {

    /** Commands whose calls decide nothing (no admitted/limited outcome). */
    static final Set<String> NOT_DECIDING = Set.of("peek", "info", "restore", "top", "refund", "release", "policy");

    /** The commands counted when the first read fails (INFO ratelimit's, 0.3.0). */
    static final List<String> COMMANDS = List.of("token", "period", "slide", "leaky", "throttle", "all", "refund",
            "charge", "acquire", "release", "peek", "info", "hit");

    /** A policy's outcomes ({@code policy_stats_<name>}'s fields). */
    static final List<String> POLICY_OUTCOMES = List.of("admitted", "limited", "shadow_limited", "near_limit");

    /** What a policy's candidate decided ({@code candidate_<outcome>}). */
    static final List<String> CANDIDATE_OUTCOMES = List.of("admitted", "limited", "near_limit");

    /** The INFO field of one policy's counters: {@code ratelimit_policy_stats_<name>:calls=…,…}. */
    static final String POLICY_LINE = "policy_stats_";

    private final Supplier<String> info;
    private final long maxAgeMs;
    private volatile Map<String, Double> fields = Map.of();
    private volatile Map<String, Map<String, Double>> policies = Map.of();
    /** The registry the meters are bound to, once bound; the policies with meters in it. */
    private MeterRegistry registry;
    private final Set<String> policyMeters = new java.util.HashSet<>();
    private volatile boolean up;
    private long readAt;
    private boolean read;

    /**
     * @param info     reads {@code INFO ratelimit} (e.g. Lettuce's {@code sync().info("ratelimit")})
     * @param maxAgeMs how long one read serves the meters
     */
    public RateLimitMeters(Supplier<String> info, long maxAgeMs) {
        this.info = info;
        this.maxAgeMs = maxAgeMs;
    }

    /** Parses {@code ratelimit_<field>:<number>} lines. */
    static Map<String, Double> parse(String text) {
        Map<String, Double> out = new LinkedHashMap<>();
        for (String line : text.split("\r?\n")) {
            int colon = line.lastIndexOf(':');
            if (!line.startsWith("ratelimit_") || colon < 0) {
                continue;
            }
            try {
                out.put(line.substring("ratelimit_".length(), colon), Double.parseDouble(line.substring(colon + 1)));
            }
            catch (NumberFormatException e) {
                // not a number (ratelimit_version, a policy's stats line): not a meter here
            }
        }
        return out;
    }

    /** Parses {@code ratelimit_policy_stats_<name>:<field>=<number>,…} lines: name → fields. */
    static Map<String, Map<String, Double>> parsePolicies(String text) {
        Map<String, Map<String, Double>> out = new LinkedHashMap<>();
        String prefix = "ratelimit_" + POLICY_LINE;
        for (String line : text.split("\r?\n")) {
            int colon = line.lastIndexOf(':');
            if (!line.startsWith(prefix) || colon < prefix.length()) {
                continue;
            }
            Map<String, Double> stats = new LinkedHashMap<>();
            for (String kv : line.substring(colon + 1).split(",")) {
                int eq = kv.indexOf('=');
                if (eq > 0) {
                    try {
                        stats.put(kv.substring(0, eq), Double.parseDouble(kv.substring(eq + 1)));
                    }
                    catch (NumberFormatException e) {
                        // not a counter
                    }
                }
            }
            out.put(line.substring(prefix.length(), colon), stats);
        }
        return out;
    }

    private synchronized Map<String, Double> snapshot() {
        long now = System.currentTimeMillis();
        if (!read || now - readAt >= maxAgeMs) {
            read = true;
            readAt = now;
            try {
                String text = info.get();
                fields = parse(text);
                policies = parsePolicies(text);
                up = true;
                registerPolicies();
            }
            catch (RuntimeException e) {
                up = false;
            }
        }
        return fields;
    }

    /** Meters for each policy the last read showed that has none yet (once bound). */
    private void registerPolicies() {
        if (registry == null) {
            return;
        }
        policies.forEach((name, stats) -> {
            if (!policyMeters.add(name + (stats.containsKey("candidate_calls") ? "\0candidate" : ""))) {
                return;
            }
            for (String outcome : POLICY_OUTCOMES) {
                counter(registry, "ratelimit.policy.decisions", "Decisions per server policy (RL.HIT) by outcome "
                        + "(admitted, limited, shadow_limited, near_limit)", m -> m.policyField(name, outcome),
                        "policy", name, "outcome", outcome);
            }
            if (stats.containsKey("candidate_calls")) {
                for (String outcome : CANDIDATE_OUTCOMES) {
                    counter(registry, "ratelimit.policy.candidate.decisions", "What a policy's candidate (evaluated "
                            + "in shadow beside it) decided, by outcome (admitted, limited, near_limit)",
                            m -> m.policyField(name, "candidate_" + outcome), "policy", name, "outcome", outcome);
                }
            }
        });
    }

    private double policyField(String policy, String name) {
        snapshot();
        return policies.getOrDefault(policy, Map.of()).getOrDefault(name, 0.0);
    }

    private double field(String name) {
        return snapshot().getOrDefault(name, 0.0);
    }

    @Override
    public void bindTo(MeterRegistry registry) {
        Map<String, Double> first = snapshot();
        synchronized (this) {
            this.registry = registry;
            registerPolicies();
        }
        List<String> commands = first.keySet().stream().filter(k -> k.endsWith("_calls"))
                .map(k -> k.substring(0, k.length() - "_calls".length())).toList();
        if (commands.isEmpty()) {
            commands = COMMANDS;
        }
        Gauge.builder("ratelimit.up", this, m -> {
            m.snapshot();
            return m.up ? 1 : 0;
        }).description("Whether the server answered the last read (1) or not (0)").register(registry);
        for (String c : commands) {
            counter(registry, "ratelimit.calls", "Calls of each module command, errors included",
                    m -> m.field(c + "_calls"), "command", c);
            counter(registry, "ratelimit.errors", "Calls of each module command answered with an error",
                    m -> m.field(c + "_errors"), "command", c);
            if (!NOT_DECIDING.contains(c)) {
                for (String outcome : List.of("admitted", "limited")) {
                    counter(registry, "ratelimit.decisions",
                            "Limiting calls the module decided, by command and outcome (admitted, limited)",
                            m -> m.field(c + "_" + outcome), "command", c, "outcome", outcome);
                }
            }
        }
        Gauge.builder("ratelimit.waiting", this, m -> m.field("waiting")).description("Clients blocked in WAIT now")
                .register(registry);
        counter(registry, "ratelimit.wait.admitted", "Calls admitted after waiting (WAIT)",
                m -> m.field("wait_admitted"));
        counter(registry, "ratelimit.wait.timeouts", "Waits (WAIT) that timed out", m -> m.field("wait_timeouts"));
        Gauge.builder("ratelimit.top.refusals", this, m -> m.field("top_refusals"))
                .description("Refusals RL.TOP covers now (the last one to two windows)").register(registry);
        Gauge.builder("ratelimit.top.error.bound", this, m -> m.field("top_error_bound"))
                .description("Every count RL.TOP reports is within this of the true count").register(registry);
    }

    private void counter(MeterRegistry registry, String name, String description,
            ToDoubleFunction<RateLimitMeters> value, String... tags) {
        FunctionCounter.builder(name, this, value).description(description).tags(tags).register(registry);
    }
}

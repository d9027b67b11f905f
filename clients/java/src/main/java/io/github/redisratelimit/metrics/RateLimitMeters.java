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
 * {@code ratelimit_top_refusals}, {@code ratelimit_top_error_bound}. One {@code INFO} per scrape
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

    private final Supplier<String> info;
    private final long maxAgeMs;
    private volatile Map<String, Double> fields = Map.of();
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

    private synchronized Map<String, Double> snapshot() {
        long now = System.currentTimeMillis();
        if (!read || now - readAt >= maxAgeMs) {
            read = true;
            readAt = now;
            try {
                fields = parse(info.get());
                up = true;
            }
            catch (RuntimeException e) {
                up = false;
            }
        }
        return fields;
    }

    private double field(String name) {
        return snapshot().getOrDefault(name, 0.0);
    }

    @Override
    public void bindTo(MeterRegistry registry) {
        Map<String, Double> first = snapshot();
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

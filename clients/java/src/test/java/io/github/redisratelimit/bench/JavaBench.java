package io.github.redisratelimit.bench;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.redisson.Redisson;
import org.redisson.api.RRateLimiter;
import org.redisson.api.RateType;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;
import org.springframework.cloud.gateway.filter.ratelimit.RateLimiter;
import org.springframework.cloud.gateway.filter.ratelimit.RedisRateLimiter;
import org.springframework.core.io.ClassPathResource;
import org.springframework.data.redis.connection.RedisStandaloneConfiguration;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;
import org.springframework.data.redis.core.ReactiveStringRedisTemplate;
import org.springframework.data.redis.core.script.DefaultRedisScript;
import org.springframework.scripting.support.ResourceScriptSource;

import io.github.redisratelimit.Limit;
import io.github.redisratelimit.RateLimitClient;
import io.github.redisratelimit.RedisServer;
import io.github.redisratelimit.redisson.RedissonRateLimiters;
import io.github.redisratelimit.scg.GatewayRateLimitProperties;
import io.github.redisratelimit.scg.ModuleRedisRateLimiter;
import io.lettuce.core.RedisClient;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * {@code make bench-java}: each drop-in against the stock implementation it replaces, on one
 * server with the module, one run: Redis server time per decision (INFO commandstats usec of the
 * commands sent, a script's time including the commands it runs) and decisions/s; then a
 * 100-thread hot-key test of each drop-in. Runs only with {@code -Dbench.out=FILE} (it replaces
 * the "## Java" section of FILE).
 */
class JavaBench {

    static final int DECISIONS = Integer.getInteger("bench.decisions", 20_000);
    static final int KEYS = 10_000;
    static final int THREADS = 16;

    record Row(String decision, String limit, double stockUs, double oursUs, double stockRate, double oursRate,
            double stockCmds, double oursCmds) {
    }

    /** usec and calls of every command since the last CONFIG RESETSTAT. */
    static long[] stats(RateLimitClient raw, io.lettuce.core.api.sync.RedisCommands<String, String> redis) {
        long usec = 0;
        long calls = 0;
        for (String line : redis.info("commandstats").split("\r?\n")) {
            if (!line.startsWith("cmdstat_") || line.startsWith("cmdstat_info") || line.startsWith("cmdstat_config")) {
                continue;
            }
            for (String f : line.substring(line.indexOf(':') + 1).split(",")) {
                if (f.startsWith("usec=")) {
                    usec += Long.parseLong(f.substring(5));
                }
                if (f.startsWith("calls=")) {
                    calls += Long.parseLong(f.substring(6));
                }
            }
        }
        return new long[] { usec, calls };
    }

    /** Runs {@code decide} DECISIONS times from THREADS threads: {server µs, decisions/s, commands} per decision. */
    static double[] measure(io.lettuce.core.api.sync.RedisCommands<String, String> redis,
            Function<String, Boolean> decide, AtomicLong refused) throws Exception {
        redis.configResetstat();
        ExecutorService pool = Executors.newFixedThreadPool(THREADS);
        List<Callable<Void>> tasks = new ArrayList<>();
        for (int t = 0; t < THREADS; t++) {
            tasks.add(() -> {
                for (int i = 0; i < DECISIONS / THREADS; i++) {
                    if (!decide.apply("k" + ThreadLocalRandom.current().nextInt(KEYS))) {
                        refused.incrementAndGet();
                    }
                }
                return null;
            });
        }
        long t0 = System.nanoTime();
        for (Future<Void> f : pool.invokeAll(tasks)) {
            f.get();
        }
        double secs = (System.nanoTime() - t0) / 1e9;
        pool.shutdown();
        long[] s = stats(null, redis);
        int n = DECISIONS / THREADS * THREADS;
        return new double[] { (double) s[0] / n, n / secs, (double) s[1] / n };
    }

    @Test
    void bench() throws Exception {
        String out = System.getProperty("bench.out");
        Assumptions.assumeTrue(out != null && !out.isBlank(), "make bench-java sets -Dbench.out");
        List<Row> rows = new ArrayList<>();
        List<String> notes = new ArrayList<>();
        try (RedisServer server = RedisServer.start()) {
            RedisClient lettuce = RedisClient.create(server.uri());
            var redis = lettuce.connect().sync();

            // Spring Cloud Gateway: the stock script through the stock limiter, then the drop-in
            LettuceConnectionFactory factory = new LettuceConnectionFactory(
                    new RedisStandaloneConfiguration("127.0.0.1", server.port()));
            factory.afterPropertiesSet();
            factory.start();
            ReactiveStringRedisTemplate template = new ReactiveStringRedisTemplate(factory);
            DefaultRedisScript<List<Long>> script = stockScript();
            RedisRateLimiter.Config config = new RedisRateLimiter.Config().setReplenishRate(1_000_000)
                    .setBurstCapacity(1_000_000).setRequestedTokens(1);
            RedisRateLimiter stock = new RedisRateLimiter(template, script, null);
            stock.getConfig().put("route", config);
            GatewayRateLimitProperties props = new GatewayRateLimitProperties();
            props.setTimeout(Duration.ofSeconds(5));
            RateLimitClient gatewayClient = RateLimitClient.of(RedisClient.create(server.uri()), Duration.ofSeconds(5));
            ModuleRedisRateLimiter ours = new ModuleRedisRateLimiter(template, script, null, () -> gatewayClient, props);
            ours.getConfig().put("route", config);
            AtomicLong refused = new AtomicLong();
            Function<RedisRateLimiter, Function<String, Boolean>> gw = l -> k -> {
                RateLimiter.Response r = l.isAllowed("route", k).block();
                return r != null && r.isAllowed();
            };
            double[] s = measure(redis, gw.apply(stock), refused);
            double[] o = measure(redis, gw.apply(ours), refused);
            rows.add(new Row("Spring Cloud Gateway `RedisRateLimiter.isAllowed`", "replenishRate 1000000, burst 1000000 per key",
                    s[0], o[0], s[1], o[1], s[2], o[2]));
            notes.add(String.format(Locale.ROOT, "- SCG drop-in: server time %.2f × the stock script's (bar ≤ 0.3: %s); refused: %d.",
                    o[0] / s[0], o[0] / s[0] <= 0.3 ? "met" : "not met", refused.get()));

            // Redisson: the stock RRateLimiter, then the drop-in (limiters set up before the clock runs)
            Config rc = new Config();
            rc.useSingleServer().setAddress(server.uri());
            RedissonClient stockRedisson = Redisson.create(rc);
            RedissonClient wrapped = RedissonRateLimiters.wrap(Redisson.create(rc));
            refused.set(0);
            double[][] r = new double[2][];
            int i = 0;
            for (RedissonClient c : List.of(stockRedisson, wrapped)) {
                Map<String, RRateLimiter> limiters = new java.util.HashMap<>();
                for (int k = 0; k < KEYS; k++) {
                    RRateLimiter l = c.getRateLimiter((i == 0 ? "stock" : "ours") + ":k" + k);
                    l.trySetRate(RateType.OVERALL, 1_000_000, Duration.ofSeconds(1));
                    limiters.put("k" + k, l);
                }
                r[i++] = measure(redis, k -> limiters.get(k).tryAcquire(), refused);
            }
            rows.add(new Row("Redisson `RRateLimiter.tryAcquire`", "1000000 per second per limiter",
                    r[0][0], r[1][0], r[0][1], r[1][1], r[0][2], r[1][2]));
            notes.add(String.format(Locale.ROOT, "- Redisson drop-in: server time %.2f × stock Redisson's (bar ≤ 0.3: %s); refused: %d.",
                    r[1][0] / r[0][0], r[1][0] / r[0][0] <= 0.3 ? "met" : "not met", refused.get()));

            // hot keys: 100 threads × 100 calls on one key whose limit binds
            RRateLimiter hot = wrapped.getRateLimiter("hot");
            hot.trySetRate(RateType.OVERALL, 5000, Duration.ofHours(1));
            long admitted = hot(() -> hot.tryAcquire());
            notes.add("- Hot key (Redisson drop-in): 100 threads × 100 `tryAcquire` on one limiter of 5000 per hour: "
                    + admitted + " admitted, over-admission " + Math.max(0, admitted - 5000) + ".");
            assertThat(admitted).isEqualTo(5000);
            RedisRateLimiter.Config hotConfig = new RedisRateLimiter.Config().setReplenishRate(1)
                    .setBurstCapacity(5000).setRequestedTokens(1);
            ours.getConfig().put("hot", hotConfig);
            long t0 = System.currentTimeMillis();
            long gwAdmitted = hot(() -> ours.isAllowed("hot", "one").block().isAllowed());
            long allowance = 5000 + (System.currentTimeMillis() - t0) / 1000 + 1;
            notes.add("- Hot key (SCG drop-in): 100 threads × 100 `isAllowed` on one key of burst 5000, 1 token/s: "
                    + gwAdmitted + " admitted (allowance 5000 + 1 per elapsed second), over-admission "
                    + Math.max(0, gwAdmitted - allowance) + ".");
            assertThat(gwAdmitted).isLessThanOrEqualTo(allowance);
            wrapped.shutdown();
            stockRedisson.shutdown();
            ours.destroy();
            factory.destroy();
            lettuce.shutdown();
        }
        write(Path.of(out), rows, notes);
    }

    /** The stock script bean, as GatewayRedisAutoConfiguration defines it. */
    @SuppressWarnings({ "unchecked", "rawtypes" })
    static DefaultRedisScript<List<Long>> stockScript() {
        DefaultRedisScript script = new DefaultRedisScript();
        script.setScriptSource(new ResourceScriptSource(new ClassPathResource("META-INF/scripts/request_rate_limiter.lua")));
        script.setResultType(List.class);
        return script;
    }

    static long hot(Callable<Boolean> call) throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(100);
        List<Callable<Long>> tasks = new ArrayList<>();
        for (int t = 0; t < 100; t++) {
            tasks.add(() -> {
                long n = 0;
                for (int i = 0; i < 100; i++) {
                    n += call.call() ? 1 : 0;
                }
                return n;
            });
        }
        long admitted = 0;
        for (Future<Long> f : pool.invokeAll(tasks)) {
            admitted += f.get();
        }
        pool.shutdown();
        return admitted;
    }

    static void write(Path file, List<Row> rows, List<String> notes) throws IOException {
        StringBuilder b = new StringBuilder("## Java\n\n");
        b.append("`make bench-java` (clients/java, JavaBench, ").append(LocalDate.now()).append("; ")
                .append(Runtime.getRuntime().availableProcessors()).append(" vCPUs, Java ")
                .append(System.getProperty("java.version")).append(", one run): each drop-in against the stock ")
                .append("implementation it replaces, on the same redis-server with the module and Lettuce 6.8.2. ")
                .append(DECISIONS).append(" decisions by ").append(THREADS)
                .append(" threads, the key drawn at random from ").append(KEYS)
                .append(", limits that never bind. Server time: INFO commandstats usec of every command sent ")
                .append("(EVALSHA's includes the commands its script runs), per decision.\n\n")
                .append("| decision | limit | server time stock | ours | ratio | decisions/s stock | ours | ratio | commands per decision (a script's included) stock | ours |\n")
                .append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for (Row r : rows) {
            b.append(String.format(Locale.ROOT, "| %s | %s | %.2f µs | %.2f µs | %.2f | %,.0f | %,.0f | %.2f | %.2f | %.2f |%n",
                    r.decision(), r.limit(), r.stockUs(), r.oursUs(), r.oursUs() / r.stockUs(), r.stockRate(),
                    r.oursRate(), r.oursRate() / r.stockRate(), r.stockCmds(), r.oursCmds()));
        }
        b.append('\n');
        for (String n : notes) {
            b.append(n).append('\n');
        }
        String text = Files.exists(file) ? Files.readString(file) : "";
        int at = text.indexOf("## Java\n");
        String section = b.toString();
        if (at < 0) {
            text = text.endsWith("\n") || text.isEmpty() ? text + "\n" + section : text + "\n\n" + section;
        }
        else {
            int next = text.indexOf("\n## ", at + 1);
            text = text.substring(0, at) + section + (next < 0 ? "" : text.substring(next));
        }
        Files.writeString(file, text);
        System.out.println(section);
    }
}

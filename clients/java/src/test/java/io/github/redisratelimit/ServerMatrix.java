package io.github.redisratelimit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.platform.engine.discovery.ClassNameFilter.excludeClassNamePatterns;
import static org.junit.platform.engine.discovery.DiscoverySelectors.selectPackage;

import java.io.File;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.platform.launcher.Launcher;
import org.junit.platform.launcher.LauncherDiscoveryRequest;
import org.junit.platform.launcher.core.LauncherDiscoveryRequestBuilder;
import org.junit.platform.launcher.core.LauncherFactory;
import org.junit.platform.launcher.listeners.SummaryGeneratingListener;
import org.junit.platform.launcher.listeners.TestExecutionSummary;

/**
 * {@code make java-compat}: every test class of the package once per server of
 * {@code -Drl.servers} (paths separated by {@code :}), in this one JVM and Maven run instead of
 * one {@code mvn test} per server. Each server's run sets {@code rl.server} (which
 * {@link RedisServer} starts) and prints a {@code [matrix]} line with its counts; any failure
 * fails this test with the failed tests' names. Runs only when {@code rl.servers} is set.
 */
class ServerMatrix {

    @Test
    void everyTestClassPassesOnEveryServer() {
        String servers = System.getProperty("rl.servers", "");
        Assumptions.assumeFalse(servers.isBlank(), "make java-compat sets -Drl.servers");
        String before = System.getProperty("rl.server");
        List<String> failed = new ArrayList<>();
        try {
            for (String server : servers.split(File.pathSeparator)) {
                if (server.isBlank()) {
                    continue;
                }
                System.setProperty("rl.server", server);
                TestExecutionSummary s = run();
                String line = "[matrix] " + server + ": tests " + s.getTestsFoundCount() + ", passed "
                        + s.getTestsSucceededCount() + ", failed " + s.getTotalFailureCount() + ", skipped "
                        + (s.getTestsSkippedCount() + s.getTestsAbortedCount()) + ", "
                        + (s.getTimeFinished() - s.getTimeStarted()) + " ms";
                System.out.println(line);
                System.err.println(line);
                assertThat(s.getTestsFoundCount()).as("tests found for " + server).isPositive();
                s.getFailures().forEach(f -> {
                    failed.add(server + ": " + f.getTestIdentifier().getLegacyReportingName() + ": "
                            + f.getException());
                    f.getException().printStackTrace();
                });
            }
        }
        finally {
            if (before == null) {
                System.clearProperty("rl.server");
            }
            else {
                System.setProperty("rl.server", before);
            }
        }
        assertThat(failed).as("failed tests").isEmpty();
    }

    /** The package's test classes but this one and the benchmark. */
    private static TestExecutionSummary run() {
        LauncherDiscoveryRequest request = LauncherDiscoveryRequestBuilder.request()
                .selectors(selectPackage("io.github.redisratelimit"))
                .filters(excludeClassNamePatterns(".*\\.ServerMatrix", ".*\\.JavaBench"))
                .build();
        Launcher launcher = LauncherFactory.create();
        SummaryGeneratingListener summary = new SummaryGeneratingListener();
        launcher.execute(request, summary);
        return summary.getSummary();
    }
}

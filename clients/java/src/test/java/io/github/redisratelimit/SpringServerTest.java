package io.github.redisratelimit;

import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * A Spring Boot test whose application's Redis ({@code spring.data.redis.*}) is a server of the
 * Spring tests: one for all of them (Spring caches their application contexts across classes),
 * started before the first context and stopped when the test JVM exits.
 */
public abstract class SpringServerTest {

    /** The Spring tests' server. */
    protected static final RedisServer SERVER = RedisServer.start();

    static {
        Runtime.getRuntime().addShutdownHook(new Thread(SERVER::close));
    }

    @DynamicPropertySource
    static void redis(DynamicPropertyRegistry r) {
        r.add("spring.data.redis.host", () -> "127.0.0.1");
        r.add("spring.data.redis.port", SERVER::port);
    }
}

package io.github.redisratelimit;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/** A test class with its own server (the module loaded, a free port) and a client of it. */
public abstract class ServerTest {

    /** The class's server. */
    protected static RedisServer server;

    /** A client of it. */
    protected static RateLimitClient rl;

    @BeforeAll
    static void startServer() {
        server = RedisServer.start();
        rl = RateLimitClient.create(server.uri());
    }

    @AfterAll
    static void stopServer() {
        rl.close();
        server.close();
    }
}

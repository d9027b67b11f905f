package io.github.redisratelimit;

import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * Sends one module command and completes with its raw reply: {@code Long} for integers,
 * {@code String} for strings, {@code List<Object>} for arrays, {@code null} for nil; completes
 * exceptionally with the server's error. {@link LettuceTransport} is the one over Lettuce; the
 * Spring Cloud Gateway drop-in has one over Spring Data Redis' connection.
 */
public interface Transport extends AutoCloseable {

    /**
     * @param command  the command
     * @param args     its arguments after the name
     * @param keyIndex the index of its key in {@code args} (cluster routing), or {@code -1}
     * @param blocking the call may wait on the server ({@code WAIT}): it needs a connection of its own
     * @return the reply
     */
    CompletableFuture<Object> send(Command command, List<String> args, int keyIndex, boolean blocking);

    /** Closes the connections this transport opened (never the ones it was given). */
    @Override
    void close();
}

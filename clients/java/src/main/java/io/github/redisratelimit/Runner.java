package io.github.redisratelimit;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import io.lettuce.core.RedisCommandExecutionException;

/**
 * Runs a {@link Request} on a {@link Transport}: adds {@code DEADLINE now + timeout (+ wait)}
 * to limiting calls, bounds the wait for the reply by the same instant, and turns failures into
 * {@link RateLimitException}s.
 */
final class Runner {

    private final Transport transport;
    private final Duration timeout;

    Runner(Transport transport, Duration timeout) {
        this.transport = transport;
        this.timeout = timeout;
    }

    Transport transport() {
        return transport;
    }

    Duration timeout() {
        return timeout;
    }

    /** The client-side bound of a call, in ms: -1 for none (a wait without limit). */
    long boundMs(Request<?> r) {
        if (r.waitMs() == 0) {
            return -1;
        }
        return timeout.toMillis() + Math.max(0, r.waitMs());
    }

    <T> CompletableFuture<T> run(Request<T> r) {
        long bound = boundMs(r);
        List<String> args = r.args();
        if (r.deadline() && bound >= 0) {
            args = new ArrayList<>(args);
            args.add("DEADLINE");
            args.add(Long.toString(System.currentTimeMillis() + bound));
        }
        CompletableFuture<Object> sent;
        try {
            sent = transport.send(r.command(), args, r.keyIndex(), r.waitMs() >= 0);
        }
        catch (RuntimeException e) {
            return CompletableFuture.failedFuture(wrap(e, r));
        }
        if (bound >= 0) {
            sent = sent.orTimeout(bound, TimeUnit.MILLISECONDS);
        }
        return sent.handle((reply, e) -> {
            if (e != null) {
                throw wrap(e, r);
            }
            return r.parse().apply(reply);
        });
    }

    <T> T sync(Request<T> r) {
        try {
            return run(r).get();
        }
        catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new RateLimitException(r.command() + " interrupted", e);
        }
        catch (ExecutionException e) {
            throw wrap(e.getCause(), r);
        }
    }

    static RateLimitException wrap(Throwable e, Request<?> r) {
        while ((e instanceof CompletionException || e instanceof ExecutionException) && e.getCause() != null) {
            e = e.getCause();
        }
        if (e instanceof RateLimitException rle) {
            return rle;
        }
        if (e instanceof RedisCommandExecutionException x) {
            String m = x.getMessage() == null ? "" : x.getMessage();
            if (m.startsWith("DEADLINE")) {
                return new DeadlineExceededException(m, x);
            }
            return new RateLimitException(m, x);
        }
        if (e instanceof TimeoutException) {
            return new DeadlineExceededException(r.command() + " timed out: no reply within its deadline", e);
        }
        return new RateLimitException(r.command() + " failed: " + e, e);
    }
}

package io.github.redisratelimit;

/**
 * The call reached the server after its caller's deadline ({@code DEADLINE} option), or its
 * client-side timeout ran out: the server counted nothing for a call answered
 * {@code -DEADLINE}. Treat it like a timeout.
 */
public class DeadlineExceededException extends RateLimitException {

    private static final long serialVersionUID = 1L;

    /**
     * @param message what the server or client said
     * @param cause   the underlying exception
     */
    public DeadlineExceededException(String message, Throwable cause) {
        super(message, cause);
    }
}

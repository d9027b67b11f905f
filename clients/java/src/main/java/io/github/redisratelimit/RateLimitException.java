package io.github.redisratelimit;

/**
 * A call failed: the server's error (its message kept, e.g. {@code ERR capacity must be …} or
 * {@code WRONGTYPE …}), a timeout, or a connection failure (the Lettuce exception is the cause).
 */
public class RateLimitException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    /** @param message what failed */
    public RateLimitException(String message) {
        super(message);
    }

    /**
     * @param message what failed
     * @param cause   the underlying exception
     */
    public RateLimitException(String message, Throwable cause) {
        super(message, cause);
    }

    /**
     * The error code of a server error: the first word ({@code ERR}, {@code WRONGTYPE},
     * {@code DEADLINE}), or an empty string when the failure was not the server's answer.
     *
     * @return the error code
     */
    public String code() {
        String m = getMessage();
        if (m == null || getCause() == null && !m.isEmpty() && !Character.isUpperCase(m.charAt(0))) {
            return "";
        }
        int sp = m.indexOf(' ');
        String first = sp < 0 ? m : m.substring(0, sp);
        return first.chars().allMatch(c -> Character.isUpperCase(c) || c == '_') ? first : "";
    }
}

package io.github.redisratelimit;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.function.Function;
import java.util.function.Supplier;

import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulConnection;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.cluster.ClusterClientOptions;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.lettuce.core.cluster.api.async.RedisClusterAsyncCommands;
import io.lettuce.core.codec.StringCodec;
import io.lettuce.core.output.ArrayOutput;
import io.lettuce.core.protocol.CommandArgs;
import io.lettuce.core.protocol.ProtocolVersion;
import io.lettuce.core.protocol.RedisCommand;

/**
 * The {@link Transport} over Lettuce: a standalone {@link RedisClient} or a
 * {@link RedisClusterClient} (commands routed by their key). Calls that do not wait share one
 * connection (pipelined); calls that wait on the server ({@code WAIT}) each take a dedicated
 * connection from a small idle pool, so they never hold up the others.
 *
 * <p>Lettuce re-sends the commands in flight when a connection drops and reconnects; a limiting
 * call may already have counted. So this transport's standalone connections are opened without
 * Lettuce's auto-reconnect: a call in flight when its connection drops fails (the caller sees
 * the error, nothing is re-sent), and the next call opens a new connection. Commands queued while
 * a connection is down are filtered out of any replay too ({@link #NO_REPLAY}); on a cluster,
 * whose node connections Lettuce opens itself, that filter and the calls' {@code DEADLINE} are
 * the guard (Lettuce 6.8 re-queues commands in flight without consulting the filter).
 */
public final class LettuceTransport implements Transport {

    /** Lettuce's replay filter: true for the calls that must never be re-sent. */
    public static final java.util.function.Predicate<RedisCommand<?, ?, ?>> NO_REPLAY = c -> c
            .getType() instanceof Command command && command.counts();

    private final Supplier<StatefulConnection<String, String>> connect;
    private final Function<StatefulConnection<String, String>, RedisClusterAsyncCommands<String, String>> commands;
    private volatile StatefulConnection<String, String> shared;
    private final ConcurrentLinkedQueue<StatefulConnection<String, String>> idle = new ConcurrentLinkedQueue<>();
    private final Runnable onClose;
    private volatile boolean closed;

    private LettuceTransport(Supplier<StatefulConnection<String, String>> connect,
            Function<StatefulConnection<String, String>, RedisClusterAsyncCommands<String, String>> commands,
            Runnable onClose) {
        this.connect = connect;
        this.commands = commands;
        this.onClose = onClose;
        this.shared = connect.get();
    }

    /**
     * A transport over a standalone client. The client's options get the replay filter (it
     * matches only this package's commands), and RESP2 when the transport owns the client.
     *
     * @param client  the client (not closed by {@link #close()} unless {@code owned})
     * @param owned   shut the client down on close
     * @return the transport
     */
    public static LettuceTransport of(RedisClient client, boolean owned) {
        ClientOptions.Builder b = client.getOptions().mutate().replayFilter(NO_REPLAY);
        client.setOptions((owned ? b.protocolVersion(ProtocolVersion.RESP2) : b).build());
        return new LettuceTransport(() -> connectWithoutReconnect(client),
                c -> ((StatefulRedisConnection<String, String>) c).async(), owned ? client::shutdown : () -> { });
    }

    /**
     * A transport over a cluster client: every call goes to the node that owns its key.
     *
     * @param client the client (not closed by {@link #close()} unless {@code owned})
     * @param owned  shut the client down on close
     * @return the transport
     */
    public static LettuceTransport of(RedisClusterClient client, boolean owned) {
        ClientOptions o = client.getOptions();
        ClusterClientOptions base = o instanceof ClusterClientOptions cco ? cco : ClusterClientOptions.create();
        ClientOptions.Builder b = base.mutate().replayFilter(NO_REPLAY);
        client.setOptions((ClusterClientOptions) (owned ? b.protocolVersion(ProtocolVersion.RESP2) : b).build());
        return new LettuceTransport(() -> {
            StatefulRedisClusterConnection<String, String> c = client.connect(StringCodec.UTF8);
            return c;
        }, c -> ((StatefulRedisClusterConnection<String, String>) c).async(), owned ? client::shutdown : () -> { });
    }

    /**
     * A connection of the client that Lettuce does not reconnect (its endpoint takes the options
     * in force when it is opened; the client's own options are restored at once).
     */
    private static StatefulConnection<String, String> connectWithoutReconnect(RedisClient client) {
        synchronized (client) {
            ClientOptions before = client.getOptions();
            client.setOptions(before.mutate().autoReconnect(false).build());
            try {
                return client.connect(StringCodec.UTF8);
            }
            finally {
                client.setOptions(before);
            }
        }
    }

    /** The shared connection, opened again when it was closed (a dropped connection). */
    private StatefulConnection<String, String> shared() {
        StatefulConnection<String, String> c = shared;
        if (c.isOpen() || closed) {
            return c;
        }
        synchronized (this) {
            if (!shared.isOpen()) {
                shared = connect.get();
            }
            return shared;
        }
    }

    @Override
    public CompletableFuture<Object> send(Command command, List<String> args, int keyIndex, boolean blocking) {
        CommandArgs<String, String> a = new CommandArgs<>(StringCodec.UTF8);
        for (int i = 0; i < args.size(); i++) {
            if (i == keyIndex) {
                a.addKey(args.get(i));
            }
            else {
                a.add(args.get(i));
            }
        }
        if (!blocking) {
            return dispatch(shared(), command, a);
        }
        StatefulConnection<String, String> own = idle.poll();
        StatefulConnection<String, String> conn = own != null && own.isOpen() ? own : connect.get();
        return dispatch(conn, command, a).whenComplete((r, e) -> {
            if (closed || !conn.isOpen()) {
                conn.closeAsync();
            }
            else {
                idle.add(conn);
            }
        });
    }

    private CompletableFuture<Object> dispatch(StatefulConnection<String, String> conn, Command command,
            CommandArgs<String, String> args) {
        return commands.apply(conn).dispatch(command, new ArrayOutput<>(StringCodec.UTF8), args)
                .toCompletableFuture().thenApply(LettuceTransport::normalize);
    }

    /** The reply of an {@link ArrayOutput}: its list, or the single value of a non-array reply. */
    static Object normalize(Object reply) {
        if (reply instanceof List<?> l) {
            List<Object> out = new ArrayList<>(l.size());
            for (Object o : l) {
                out.add(normalize(o));
            }
            return out;
        }
        if (reply instanceof Map<?, ?> m) {
            List<Object> out = new ArrayList<>(m.size() * 2);
            m.forEach((k, v) -> {
                out.add(normalize(k));
                out.add(normalize(v));
            });
            return out;
        }
        if (reply instanceof ByteBuffer b) {
            return StandardCharsets.UTF_8.decode(b.duplicate()).toString();
        }
        if (reply instanceof byte[] b) {
            return new String(b, StandardCharsets.UTF_8);
        }
        return reply;
    }

    @Override
    public void close() {
        closed = true;
        StatefulConnection<String, String> c;
        while ((c = idle.poll()) != null) {
            c.close();
        }
        shared.close();
        onClose.run();
    }
}

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
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulConnection;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.cluster.ClusterClientOptions;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.lettuce.core.cluster.api.async.RedisClusterAsyncCommands;
import io.lettuce.core.cluster.models.partitions.RedisClusterNode;
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
 * a connection is down are filtered out of any replay too ({@link #NO_REPLAY}). On a cluster the
 * node connections are opened without auto-reconnect too (see {@link #of(RedisClusterClient,
 * boolean)}): Lettuce 6.8 re-queues the commands in flight on a reconnecting node connection
 * without consulting the filter.
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
     * <p>A cluster connection opens its node connections when it first needs them, with the
     * client's options of that moment, so they cannot be opened without auto-reconnect the way
     * the standalone ones are. An owned client gets {@code autoReconnect(false)} for good; for the
     * application's client, the transport opens its connections through a client of its own
     * that shares the application's {@link io.lettuce.core.resource.ClientResources} (event
     * loops), options (but auto-reconnect) and nodes, so the application's connections keep
     * reconnecting as they did. A node connection that drops fails the calls in flight on it and
     * the next call opens a new one.
     *
     * @param client the client (not closed by {@link #close()} unless {@code owned})
     * @param owned  shut the client down on close
     * @return the transport
     */
    public static LettuceTransport of(RedisClusterClient client, boolean owned) {
        ClientOptions o = client.getOptions();
        ClusterClientOptions base = o instanceof ClusterClientOptions cco ? cco : ClusterClientOptions.create();
        ClientOptions.Builder b = base.mutate().replayFilter(NO_REPLAY).autoReconnect(false);
        ClusterClientOptions options = (ClusterClientOptions) (owned ? b.protocolVersion(ProtocolVersion.RESP2) : b)
                .build();
        RedisClusterClient own = owned ? client : RedisClusterClient.create(client.getResources(), nodes(client));
        own.setOptions(options);
        return new LettuceTransport(() -> own.connect(StringCodec.UTF8),
                c -> ((StatefulRedisClusterConnection<String, String>) c).async(), own::shutdown);
    }

    /**
     * The client's seed URIs, whose settings (password or credentials, TLS, timeouts) Lettuce
     * applies to every node: the partitions' node URIs carry none of them (a cluster with a
     * password refused the transport's client built from them: {@code ClusterTest}). Lettuce keeps
     * the seeds in a private field; when it cannot be read, the nodes as the client knows them.
     */
    private static List<RedisURI> nodes(RedisClusterClient client) {
        List<RedisURI> uris = new ArrayList<>();
        try {
            java.lang.reflect.Field seeds = RedisClusterClient.class.getDeclaredField("initialUris");
            seeds.setAccessible(true);
            for (Object u : (Iterable<?>) seeds.get(client)) {
                uris.add((RedisURI) u);
            }
            if (!uris.isEmpty()) {
                return uris;
            }
        }
        catch (ReflectiveOperationException | RuntimeException e) {
            uris.clear(); // another Lettuce, or a module path that closes it: the nodes below
        }
        for (RedisClusterNode n : client.getPartitions()) {
            uris.add(n.getUri());
        }
        return uris;
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

package io.github.redisratelimit;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * A real redis-server with the module loaded, on a free port, for one test class: started with a
 * startup deadline (it answers PING within 10 s or the test fails with its log), stopped by its
 * own process handle. The binary is {@code rl.server} (a compat server, or Debian's
 * {@code redis-server}), the module {@code rl.module}.
 */
public final class RedisServer implements AutoCloseable {

    private static final long STARTUP_DEADLINE_MS = 10_000;

    private final Process process;
    private final int port;
    private final Path log;
    private final Path dir;
    private final String password;

    private RedisServer(Process process, int port, Path log, Path dir, String password) {
        this.process = process;
        this.port = port;
        this.log = log;
        this.dir = dir;
        this.password = password;
    }

    /** @return a started server */
    public static RedisServer start() {
        return start(false);
    }

    /**
     * @param cluster a cluster node ({@code cluster-enabled}, its bus port, +10000, free too; its
     *                {@code nodes.conf} in a directory of its own)
     * @return a started server
     */
    public static RedisServer start(boolean cluster) {
        return start(cluster, null);
    }

    /**
     * @param cluster  a cluster node, as {@link #start(boolean)}
     * @param password {@code requirepass} and {@code masterauth}, or null for none; {@link #uri()}
     *                 carries it
     * @return a started server
     */
    public static RedisServer start(boolean cluster, String password) {
        String server = System.getProperty("rl.server", System.getenv().getOrDefault("RL_SERVER", "redis-server"));
        String module = System.getProperty("rl.module", System.getenv().getOrDefault("RL_MODULE",
                "../../target/release/libredis_ratelimit.so"));
        if (!new File(module).isFile()) {
            throw new IllegalStateException("the module is not built: " + module + " (cargo build --release)");
        }
        IllegalStateException last = null;
        for (int attempt = 0; attempt < 3; attempt++) {
            try {
                return tryStart(server, new File(module).getAbsolutePath(), cluster, password);
            }
            catch (IllegalStateException e) {
                last = e; // the port was taken between choosing and binding: choose again
            }
        }
        throw last;
    }

    /** A port nobody listens on; for a cluster node, its bus port (+10000) too. */
    private static int freePort(boolean cluster) throws IOException {
        while (true) {
            int port;
            try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
                port = s.getLocalPort();
            }
            if (!cluster) {
                return port;
            }
            if (port + 10000 > 65535) {
                continue;
            }
            try {
                new ServerSocket(port + 10000, 1, java.net.InetAddress.getLoopbackAddress()).close();
                return port;
            }
            catch (IOException taken) {
                // its bus port is taken: choose again
            }
        }
    }

    private static RedisServer tryStart(String server, String module, boolean cluster, String password) {
        try {
            int port = freePort(cluster);
            Path dir = Files.createTempDirectory("rl-java-redis-" + port + "-");
            Path log = dir.resolve("redis.log");
            List<String> cmd = new ArrayList<>(List.of(server, "--port", Integer.toString(port), "--bind",
                    "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir.toString(), "--loadmodule", module));
            if (cluster) {
                cmd.addAll(List.of("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"));
            }
            if (password != null) {
                cmd.addAll(List.of("--requirepass", password, "--masterauth", password));
            }
            Process p = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile()).start();
            RedisServer r = new RedisServer(p, port, log, dir, password);
            long deadline = System.currentTimeMillis() + STARTUP_DEADLINE_MS;
            while (System.currentTimeMillis() < deadline) {
                if (!p.isAlive()) {
                    throw new IllegalStateException("redis-server exited: " + Files.readString(log));
                }
                if (r.ping()) {
                    return r;
                }
                Thread.sleep(20);
            }
            r.close();
            throw new IllegalStateException("redis-server did not answer PING within " + STARTUP_DEADLINE_MS
                    + " ms: " + Files.readString(log));
        }
        catch (IOException e) {
            throw new IllegalStateException(e);
        }
        catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    private boolean ping() {
        try (Socket s = new Socket("127.0.0.1", port)) {
            s.setSoTimeout(1000);
            OutputStream o = s.getOutputStream();
            InputStream in = s.getInputStream();
            if (password != null) {
                o.write(("AUTH " + password + "\r\n").getBytes(StandardCharsets.US_ASCII));
                byte[] ok = new byte[5];
                int n = in.read(ok);
                if (n <= 0 || !new String(ok, 0, n, StandardCharsets.US_ASCII).startsWith("+OK")) {
                    return false;
                }
            }
            o.write("PING\r\n".getBytes(StandardCharsets.US_ASCII));
            byte[] b = new byte[7];
            int n = in.read(b);
            return n > 0 && new String(b, 0, n, StandardCharsets.US_ASCII).startsWith("+PONG");
        }
        catch (IOException e) {
            return false;
        }
    }

    /** @return the port */
    public int port() {
        return port;
    }

    /** @return {@code redis://127.0.0.1:port}, with {@code :password@} when it has one */
    public String uri() {
        return "redis://" + (password == null ? "" : ":" + password + "@") + "127.0.0.1:" + port;
    }

    /** @return the password ({@code requirepass}), or null */
    public String password() {
        return password;
    }

    /** Stops the server's process (SIGSTOP), so it accepts connections but answers nothing. */
    public void pause() throws IOException, InterruptedException {
        new ProcessBuilder("kill", "-STOP", Long.toString(process.pid())).start().waitFor();
    }

    /** Resumes a paused server. */
    public void resume() throws IOException, InterruptedException {
        new ProcessBuilder("kill", "-CONT", Long.toString(process.pid())).start().waitFor();
    }

    @Override
    public void close() {
        process.destroy();
        try {
            if (!process.waitFor(5, java.util.concurrent.TimeUnit.SECONDS)) {
                process.destroyForcibly();
            }
        }
        catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        try (var files = Files.list(dir)) {
            for (Path f : files.toList()) {
                Files.deleteIfExists(f);
            }
            Files.deleteIfExists(dir);
        }
        catch (IOException e) {
            // a leftover log in the temp directory is harmless
        }
    }
}

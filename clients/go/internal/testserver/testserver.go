// Package testserver starts a real redis-server (or valkey-server) with the module loaded, on
// a free loopback port, for the package's tests: one server per test package (TestMain),
// stopped by its PID.
//
// The server binary is RL_SERVER (default redis-server on PATH); the module is RL_MODULE
// (default target/release/libredis_ratelimit.so of the repository this package sits in).
package testserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// StartupDeadline is how long a server may take to answer PING.
const StartupDeadline = 20 * time.Second

// Server is one running server.
type Server struct {
	Addr   string
	cmd    *exec.Cmd
	exited chan struct{}
	dir    string
	log    string
}

// ModulePath is the module the servers load.
func ModulePath() (string, error) {
	if p := os.Getenv("RL_MODULE"); p != "" {
		return p, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		candidate := filepath.Join(dir, "target", "release", "libredis_ratelimit.so")
		if _, err := os.Stat(filepath.Join(dir, "Cargo.toml")); err == nil {
			if _, err := os.Stat(candidate); err != nil {
				return "", fmt.Errorf("testserver: %s missing: run `cargo build --release` (make build) first", candidate)
			}
			return candidate, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testserver: set RL_MODULE to the module (libredis_ratelimit.so)")
		}
		dir = parent
	}
}

// freePort asks the OS for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Start starts a server with the module and extra arguments; it answers PING before
// StartupDeadline or Start fails (a port taken in the meantime: tried again, three times).
func Start(extra ...string) (*Server, error) {
	return startRetrying(true, extra)
}

// StartWithoutModule starts a server that does not load the module.
func StartWithoutModule() (*Server, error) {
	return startRetrying(false, nil)
}

func startRetrying(withModule bool, extra []string) (*Server, error) {
	var last error
	for attempt := 0; attempt < 3; attempt++ {
		s, err := start(withModule, extra)
		if err == nil {
			return s, nil
		}
		last = err
	}
	return nil, last
}

func start(withModule bool, extra []string) (*Server, error) {
	module, err := ModulePath()
	if err != nil {
		return nil, err
	}
	bin := os.Getenv("RL_SERVER")
	if bin == "" {
		bin = "redis-server"
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "rl-go-server-")
	if err != nil {
		return nil, err
	}
	args := append([]string{
		"--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir,
	}, extra...)
	if withModule {
		args = append(args, "--loadmodule", module)
	}
	cmd := exec.Command(bin, args...)
	logPath := filepath.Join(dir, "server.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	logFile.Close()
	exited := make(chan struct{})
	s := &Server{Addr: fmt.Sprintf("127.0.0.1:%d", port), cmd: cmd, exited: exited, dir: dir, log: logPath}
	go func() { _ = cmd.Wait(); close(exited) }()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: time.Second})
	defer rdb.Close()
	deadline := time.Now().Add(StartupDeadline)
	for {
		select {
		case <-exited:
			out := s.Log()
			os.RemoveAll(dir)
			return nil, fmt.Errorf("testserver: %s exited at startup: %s", bin, out)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := rdb.Ping(ctx).Err()
		cancel()
		if err == nil {
			return s, nil
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			out := s.Log()
			os.RemoveAll(dir)
			return nil, fmt.Errorf("testserver: %s did not answer PING within %v: %v; log: %s", bin, StartupDeadline, err, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Log is the server's log so far (its last lines).
func (s *Server) Log() string {
	f, err := os.Open(s.log)
	if err != nil {
		return ""
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}

// Stop kills the server (by its PID) and removes its directory.
func (s *Server) Stop() {
	if s == nil || s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
	}
	os.RemoveAll(s.dir)
}

// Client is a go-redis client of the server.
func (s *Server) Client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: s.Addr})
}

// Main runs a test package's tests against one server it starts (and stops, whatever the
// outcome): addr, and the environment's REDIS_ADDR (what the examples read), are set to the
// server's address before the tests run.
func Main(m *testing.M, addr *string) {
	s, err := Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*addr = s.Addr
	// The examples read the server's address as a service would: REDIS_ADDR.
	if err := os.Setenv("REDIS_ADDR", s.Addr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		s.Stop()
		os.Exit(1)
	}
	code := m.Run()
	s.Stop()
	os.Exit(code)
}

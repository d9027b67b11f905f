package ratelimit

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// calls is how many times the server ran command (INFO commandstats).
func calls(t *testing.T, rdb *redis.Client, command string) int {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`cmdstat_` + regexp.QuoteMeta(command) + `:calls=(\d+)`).FindStringSubmatch(info)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// pause pauses the server's writes for d (CLIENT PAUSE … WRITE); unpaused when the test ends.
func pause(t *testing.T, admin *redis.Client, d time.Duration) {
	t.Helper()
	if err := admin.Do(context.Background(), "CLIENT", "PAUSE", d.Milliseconds(), "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Do(context.Background(), "CLIENT", "UNPAUSE") })
}

// wrapper is a redis.UniversalClient of a type the package does not know.
type wrapper struct{ *redis.Client }

// A 200 ms context under go-redis' defaults (ContextTimeoutEnabled false, ReadTimeout 3 s):
// the call returns when the context ends, long before the read timeout (it took 3 s).
func TestContextHonouredWhateverTheOptions(t *testing.T) {
	admin := redis.NewClient(&redis.Options{Addr: addr})
	defer admin.Close()
	if err := admin.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	clients := map[string]redis.UniversalClient{
		"client": redis.NewClient(&redis.Options{Addr: addr}),
		"ring":   redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": addr}}),
		// a type the package does not know: through its own Process
		"wrapper": wrapper{redis.NewClient(&redis.Options{Addr: addr})},
	}
	for name, rdb := range clients {
		t.Run(name, func(t *testing.T) {
			defer rdb.Close()
			rl := New(rdb)
			if err := rdb.Ping(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
			pause(t, admin, 2500*time.Millisecond)
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := rl.Limit(ctx, "ctx:"+name, Token{Capacity: 1, Rate: 1, Period: time.Second})
			took := time.Since(start)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err %v, want the context's deadline", err)
			}
			// Order, not a tight bound: back before the pause ends (and the read timeout).
			if took >= 2500*time.Millisecond {
				t.Fatalf("returned after %v: the context's 200 ms was not honoured", took)
			}
			admin.Do(context.Background(), "CLIENT", "UNPAUSE")
		})
	}
}

// A WAIT longer than go-redis' ReadTimeout: the call waits its turn on one connection and is
// admitted; the server ran the command once (go-redis sent it again on a timeout).
func TestWaitLongerThanReadTimeout(t *testing.T) {
	ctx := context.Background()
	_, admin := newClient(t)
	rdb := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: 300 * time.Millisecond})
	defer rdb.Close()
	rl := New(rdb)
	limit := Token{Capacity: 1, Rate: 1, Period: 800 * time.Millisecond}
	if d, err := rl.Limit(ctx, "w", limit); err != nil || !d.Allowed {
		t.Fatalf("first: %+v %v", d, err)
	}
	before := calls(t, admin, "rl.token")
	d, err := rl.Limit(ctx, "w", limit, Wait(3*time.Second))
	if err != nil || !d.Allowed {
		t.Fatalf("waiting call: %+v %v", d, err)
	}
	if n := calls(t, admin, "rl.token") - before; n != 1 {
		t.Fatalf("the waiting call ran %d times on the server, want 1", n)
	}
	// A call that times out is not sent again either (MaxRetries 3 by default).
	pause(t, admin, 1200*time.Millisecond)
	before = calls(t, admin, "rl.token")
	if _, err := rl.Limit(ctx, "w2", limit); err == nil {
		t.Fatal("a call past the read timeout succeeded")
	}
	time.Sleep(1500 * time.Millisecond) // the pause ends; a resent command would run now
	if n := calls(t, admin, "rl.token") - before; n > 1 {
		t.Fatalf("a timed-out call ran %d times, want at most 1", n)
	}
}

// On a ring and on a cluster, a keyed call goes through a view of its node: a WAIT longer than
// the client's ReadTimeout is admitted, and the server ran it once (go-redis timed it out and
// sent it again).
func TestWaitLongerThanReadTimeoutOnRingAndCluster(t *testing.T) {
	ctx := context.Background()
	_, admin := newClient(t)
	limit := Token{Capacity: 1, Rate: 1, Period: 800 * time.Millisecond}
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": addr}, ReadTimeout: 300 * time.Millisecond})
	defer ring.Close()
	waitOnce(t, New(ring), limit, "ring", func() int { return calls(t, admin, "rl.token") })

	if testing.Short() {
		return
	}
	nodes := startCluster(t)
	seeds := make([]string, len(nodes))
	admins := make([]*redis.Client, len(nodes))
	for i, n := range nodes {
		seeds[i] = n.Addr
		admins[i] = n.Client()
		defer admins[i].Close()
	}
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: seeds, ReadTimeout: 300 * time.Millisecond})
	defer cluster.Close()
	waitOnce(t, New(cluster), limit, "{c}w", func() int {
		total := 0
		for _, a := range admins {
			total += calls(t, a, "rl.token")
		}
		return total
	})
	// Keys of other slots are routed to their own nodes.
	if d, err := New(cluster).Limit(ctx, "{other}k", limit); err != nil || !d.Allowed {
		t.Fatalf("another slot: %+v %v", d, err)
	}
}

// waitOnce: key exhausted, then a Wait(3 s) beyond the client's 300 ms ReadTimeout is admitted,
// and ran on the server once (ran counts the server's calls).
func waitOnce(t *testing.T, rl *Client, limit Limit, key string, ran func() int) {
	t.Helper()
	ctx := context.Background()
	if d, err := rl.Limit(ctx, key, limit); err != nil || !d.Allowed {
		t.Fatalf("%s first: %+v %v", key, d, err)
	}
	before := ran()
	d, err := rl.Limit(ctx, key, limit, Wait(3*time.Second))
	if err != nil || !d.Allowed {
		t.Fatalf("%s waiting call: %+v %v", key, d, err)
	}
	if n := ran() - before; n != 1 {
		t.Fatalf("%s: the waiting call ran %d times on the server, want 1", key, n)
	}
}

// doerOf is a Doer over a go-redis client (as go-zero's *redis.Redis is over its own).
type doerOf struct {
	rdb   *redis.Client
	block chan struct{} // when set, every call waits on it first
}

func (d doerOf) DoCtx(ctx context.Context, args ...any) (any, error) {
	if d.block != nil {
		<-d.block
	}
	return d.rdb.Do(ctx, args...).Result()
}

// A client over a Doer: decisions, nil replies and server errors as over go-redis; the context
// honoured; no primaries to address.
func TestNewWithDoer(t *testing.T) {
	ctx := context.Background()
	_, rdb := newClient(t)
	rl := NewWithDoer(doerOf{rdb: rdb})
	limit := Token{Capacity: 1, Rate: 1, Period: time.Minute}
	if d, err := rl.Limit(ctx, "d", limit); err != nil || !d.Allowed {
		t.Fatalf("%+v %v", d, err)
	}
	if d, err := rl.Limit(ctx, "d", limit); err != nil || d.Allowed {
		t.Fatalf("%+v %v", d, err)
	}
	if _, ok, err := rl.Peek(ctx, "none"); ok || err != nil {
		t.Fatalf("peek of no key: %v %v", ok, err)
	}
	rdb.Set(ctx, "s", "x", 0)
	var se *ServerError
	if _, err := rl.Limit(ctx, "s", limit); !errors.As(err, &se) || se.Code != "WRONGTYPE" {
		t.Fatalf("WRONGTYPE: %v", err)
	}
	if _, err := rl.PolicyNames(ctx); err == nil {
		t.Fatal("PolicyNames over a Doer answered")
	}
	block := make(chan struct{})
	defer close(block)
	slow := NewWithDoer(doerOf{rdb: rdb, block: block})
	tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := slow.Limit(tctx, "d2", limit); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a Doer past the context: %v", err)
	}
}

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

// On a ring (no retry-free view), a WAIT ends before the read timeout: refused in time,
// never timed out and resent.
func TestWaitCappedOnRing(t *testing.T) {
	ctx := context.Background()
	_, admin := newClient(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": addr}, ReadTimeout: 400 * time.Millisecond})
	defer ring.Close()
	rl := New(ring)
	limit := Token{Capacity: 1, Rate: 1, Period: 2 * time.Second}
	if d, err := rl.Limit(ctx, "r", limit); err != nil || !d.Allowed {
		t.Fatalf("first: %+v %v", d, err)
	}
	before := calls(t, admin, "rl.token")
	d, err := rl.Limit(ctx, "r", limit, Wait(5*time.Second))
	if err != nil || d.Allowed || d.RetryAfter <= 0 {
		t.Fatalf("capped wait: %+v %v", d, err)
	}
	if n := calls(t, admin, "rl.token") - before; n != 1 {
		t.Fatalf("ran %d times, want 1", n)
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

package ratelimit

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/testserver"
)

var addr string

func TestMain(m *testing.M) { testserver.Main(m, &addr) }

func newClient(t *testing.T) (*Client, *redis.Client) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	if err := rdb.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	return New(rdb), rdb
}

// T is an instant far from now, for AT.
var T = time.UnixMilli(4_000_000_000_000)

func eq(t *testing.T, what string, got, want Decision) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: got %+v, want %+v", what, got, want)
	}
}

func TestEveryAlgorithm(t *testing.T) {
	ctx := context.Background()
	c, _ := newClient(t)
	d, err := c.Limit(ctx, "t", Token{Capacity: 10, Rate: 1, Period: time.Second}, Cost(3), At(T))
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "token", d, Decision{Allowed: true, Limit: 10, Remaining: 7, ResetAfter: 3 * time.Second, Taken: 3})
	d, _ = c.Limit(ctx, "p", Period{Limit: 5, Period: time.Minute, Align: true}, At(T))
	if !d.Allowed || d.Remaining != 4 {
		t.Fatalf("period %+v", d)
	}
	d, _ = c.Limit(ctx, "s", Slide{Limit: 2, Window: time.Second}, Cost(3), At(T))
	eq(t, "slide cost above the limit", d, Decision{Limit: 2, Remaining: 2, RetryAfter: Never})
	d, _ = c.Limit(ctx, "l", Leaky{Capacity: 5, Rate: 1, Period: time.Second}, At(T))
	d, _ = c.Limit(ctx, "l", Leaky{Capacity: 5, Rate: 1, Period: time.Second}, At(T))
	if !d.Allowed || d.RetryAfter != time.Second {
		t.Fatalf("leaky delay %+v", d)
	}
	// ATMOST: what is left, up to n.
	d, _ = c.Limit(ctx, "t", Token{Capacity: 10, Rate: 1, Period: time.Second}, AtMost(100), At(T))
	eq(t, "at most", d, Decision{Allowed: true, Limit: 10, Remaining: 0, ResetAfter: 10 * time.Second, Taken: 7})
	// redis-cell's README example.
	d, err = c.Throttle(ctx, "user123", 15, 30, time.Minute, 1)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "throttle", d, Decision{Allowed: true, Limit: 16, Remaining: 15, ResetAfter: 2 * time.Second, Taken: 1})
	// Bad parameters never reach the server.
	if _, err := c.Limit(ctx, "x", Token{Capacity: 0, Rate: 1, Period: time.Second}); err == nil {
		t.Fatal("capacity 0 accepted")
	}
	if _, err := c.Limit(ctx, "x", Period{Limit: 1, Period: 1500 * time.Microsecond}); err == nil {
		t.Fatal("a period of 1.5 ms accepted")
	}
}

func TestAllRefundChargePeekInfo(t *testing.T) {
	ctx := context.Background()
	c, _ := newClient(t)
	groups := []Group{
		{Key: "{u}:s", Limit: Token{Capacity: 10, Rate: 10, Period: time.Second}},
		{Key: "{u}:d", Limit: Period{Limit: 2, Period: time.Hour}},
	}
	for i := 0; i < 2; i++ {
		if d, err := c.All(ctx, groups, At(T)); err != nil || !d.Allowed {
			t.Fatalf("%+v %v", d, err)
		}
	}
	d, err := c.All(ctx, groups, At(T))
	if err != nil || d.Allowed || d.Index != 1 || len(d.Details) != 2 || d.Details[0].Remaining != 7 {
		t.Fatalf("binding limit %+v %v", d, err)
	}
	p, ok, err := c.Peek(ctx, "{u}:s")
	if err != nil || !ok || p.Remaining < 7 {
		t.Fatalf("peek %+v %v %v", p, ok, err)
	}
	if _, ok, _ := c.Peek(ctx, "missing"); ok {
		t.Fatal("peek of a missing key")
	}
	r, ok, err := c.Refund(ctx, "{u}:d", 1, At(T))
	if err != nil || !ok || r.Remaining != 0 || !r.Allowed {
		t.Fatalf("refund %+v %v %v", r, ok, err)
	}
	if _, ok, _ := c.Refund(ctx, "missing", 1); ok {
		t.Fatal("refund of a missing key")
	}
	ch, ok, err := c.Charge(ctx, "{u}:d", 5, At(T))
	if err != nil || !ok || ch.Allowed {
		t.Fatalf("charge %+v %v %v", ch, ok, err)
	}
	info, err := c.Info(ctx, "{u}:d")
	if err != nil || info["algorithm"] != "period" || info["limit"] != int64(2) {
		t.Fatalf("info %v %v", info, err)
	}
}

func TestLeases(t *testing.T) {
	ctx := context.Background()
	c, _ := newClient(t)
	a, err := c.Acquire(ctx, "jobs", 1, time.Minute, LeaseID("w1"))
	if err != nil || !a.Allowed || a.ID != "w1" {
		t.Fatalf("%+v %v", a, err)
	}
	b, _ := c.Acquire(ctx, "jobs", 1, time.Minute)
	if b.Allowed || b.ID != "" {
		t.Fatalf("second lease %+v", b)
	}
	if held, _ := c.Release(ctx, "jobs", "w1"); !held {
		t.Fatal("release")
	}
	if held, _ := c.Release(ctx, "jobs", "w1"); held {
		t.Fatal("released twice")
	}
}

// WAIT blocks on the server until admitted, bounded by the context's deadline too.
func TestWaitIsBoundedByTheContext(t *testing.T) {
	c, _ := newClient(t)
	limit := Token{Capacity: 1, Rate: 1, Period: time.Hour}
	if d, _ := c.Limit(context.Background(), "w", limit); !d.Allowed {
		t.Fatal("first refused")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	d, err := c.Limit(ctx, "w", limit, Wait(time.Hour))
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	if d.Allowed {
		t.Fatal("admitted a permit that is an hour away")
	}
	if time.Since(start) > 30*time.Second {
		t.Fatal("the wait outlived its context")
	}
}

func TestPoliciesHitAndTop(t *testing.T) {
	ctx := context.Background()
	c, _ := newClient(t)
	if err := c.ResetTop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.SetPolicy(ctx, "free", Period{Limit: 2, Period: time.Minute}, PolicyBan(time.Minute, false)); err != nil {
		t.Fatal(err)
	}
	if err := c.SetPolicy(ctx, "free", Period{Limit: 1, Period: time.Minute}, PolicyFor("vip")); err != nil {
		t.Fatal(err)
	}
	names, _ := c.PolicyNames(ctx)
	if strings.Join(names, ",") != "free" {
		t.Fatalf("names %v", names)
	}
	def, err := c.GetPolicy(ctx, "free", "")
	if err != nil || def["algorithm"] != "period" || def["ban_ms"] != int64(60000) {
		t.Fatalf("definition %v %v", def, err)
	}
	for i := 0; i < 3; i++ {
		d, err := c.Hit(ctx, "free", "ratelimit:t1")
		if err != nil || d.Allowed != (i < 2) {
			t.Fatalf("hit %d: %+v %v", i, d, err)
		}
	}
	stats, _ := c.PolicyStats(ctx, "free")
	if stats["calls"] != 3 || stats["admitted"] != 2 || stats["limited"] != 1 {
		t.Fatalf("stats %v", stats)
	}
	top, err := c.Top(ctx, 5, "")
	if err != nil || len(top) != 1 || top[0].Key != "ratelimit:t1" || top[0].Refused != 1 {
		t.Fatalf("top %+v %v", top, err)
	}
	if _, err := c.Hit(ctx, "nope", "k"); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("unknown policy: %v", err)
	}
	if existed, _ := c.DeletePolicy(ctx, "free", ""); !existed {
		t.Fatal("delete")
	}
	if err := c.ResetPolicyStats(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestErrorsWrapTheServers(t *testing.T) {
	ctx := context.Background()
	c, rdb := newClient(t)
	rdb.Set(ctx, "str", "x", 0)
	_, err := c.Limit(ctx, "str", Token{Capacity: 1, Rate: 1, Period: time.Second})
	var se *ServerError
	if !errors.As(err, &se) || se.Code != "WRONGTYPE" || !strings.Contains(se.Message, "string value") {
		t.Fatalf("%v", err)
	}
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		t.Fatal("go-redis' error not wrapped")
	}
	plain, err := testserver.StartWithoutModule()
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Stop()
	bare := plain.Client()
	defer bare.Close()
	_, err = New(bare).Limit(ctx, "k", Token{Capacity: 1, Rate: 1, Period: time.Second})
	if !errors.Is(err, ErrModuleNotLoaded) {
		t.Fatalf("no module: %v", err)
	}
}

// DEADLINE: a call the server judges after the caller's deadline counts nothing and is a
// deadline error; a context's deadline is sent too.
func TestDeadline(t *testing.T) {
	ctx := context.Background()
	c, _ := newClient(t)
	limit := Token{Capacity: 5, Rate: 1, Period: time.Hour}
	_, err := c.Limit(ctx, "dl", limit, Deadline(time.Now().Add(-time.Second)))
	if c.noDeadline.Load() {
		t.Skip("the module predates DEADLINE (the client fell back to calls without it)")
	}
	if !errors.Is(err, ErrDeadline) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v", err)
	}
	if _, ok, _ := c.Peek(ctx, "dl"); ok {
		t.Fatal("a call past its deadline created the key")
	}
	tctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if d, err := c.Limit(tctx, "dl", limit); err != nil || !d.Allowed || d.Remaining != 4 {
		t.Fatalf("%+v %v", d, err)
	}
}

// 100 goroutines on one hot key, no refill to speak of: exactly the capacity is admitted, each
// decision one module command.
func TestHotKeyExactUnderGoroutines(t *testing.T) {
	ctx := context.Background()
	c, rdb := newClient(t)
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 100; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				d, err := c.Limit(ctx, "hot", Token{Capacity: 500, Rate: 1, Period: time.Hour})
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if admitted.Load() != 500 {
		t.Fatalf("admitted %d of 1000, want exactly 500", admitted.Load())
	}
	stats, _ := rdb.Info(ctx, "commandstats").Result()
	if !strings.Contains(stats, "cmdstat_rl.token:calls=1000,") || strings.Contains(stats, "cmdstat_eval") {
		t.Fatalf("commands: %s", stats)
	}
}

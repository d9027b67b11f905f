package redisrate_test

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
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/redisrate"
)

var addr string

func TestMain(m *testing.M) { testserver.Main(m, &addr) }

func newLimiter(t *testing.T) (*redisrate.Limiter, *redis.Client) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	if err := rdb.FlushDB(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	return redisrate.NewLimiter(rdb), rdb
}

func within(t *testing.T, what string, got, want, delta time.Duration) {
	t.Helper()
	if got < want-delta || got > want+delta {
		t.Fatalf("%s = %v, want %v ± %v", what, got, want, delta)
	}
}

// The walk-through of redis_rate's own TestAllow and TestAllowAtMost, with AT-free calls on
// a real server: the same numbers.
func TestAllowAndAllowAtMost(t *testing.T) {
	ctx := context.Background()
	l, rdb := newLimiter(t)
	limit := redisrate.PerSecond(10)
	if limit.String() != "10 req/s (burst 10)" || limit.IsZero() {
		t.Fatalf("limit %v", limit)
	}
	res, err := l.Allow(ctx, "id", limit)
	if err != nil || res.Allowed != 1 || res.Remaining != 9 || res.RetryAfter != -1 {
		t.Fatalf("%+v %v", res, err)
	}
	within(t, "ResetAfter", res.ResetAfter, 100*time.Millisecond, 10*time.Millisecond)
	// The key is redis_rate's: rate:<key>.
	if n, _ := rdb.Exists(ctx, "rate:rl:id").Result(); n != 1 {
		t.Fatal("rate:rl:id missing")
	}
	res, _ = l.AllowAtMost(ctx, "id", limit, 2)
	if res.Allowed != 2 || res.Remaining != 7 || res.RetryAfter != -1 {
		t.Fatalf("%+v", res)
	}
	res, _ = l.AllowN(ctx, "id", limit, 0)
	if res.Allowed != 0 || res.Remaining != 7 || res.RetryAfter != -1 {
		t.Fatalf("%+v", res)
	}
	// Whole permits are taken; the fraction of one refilled meanwhile (a busy machine) stays.
	res, _ = l.AllowAtMost(ctx, "id", limit, 10)
	if res.Allowed != 7 || res.Remaining != 0 || res.RetryAfter != -1 || res.ResetAfter <= 900*time.Millisecond || res.ResetAfter > time.Second {
		t.Fatalf("%+v", res)
	}
	res, _ = l.AllowAtMost(ctx, "id", limit, 1000)
	if res.Allowed != 0 || res.Remaining != 0 || res.RetryAfter <= 0 || res.RetryAfter > 100*time.Millisecond {
		t.Fatalf("%+v", res)
	}
	res, _ = l.AllowN(ctx, "id", limit, 1000)
	if res.Allowed != 0 {
		t.Fatalf("%+v", res)
	}
	within(t, "RetryAfter", res.RetryAfter, 100*time.Second, time.Second)
	if err := l.Reset(ctx, "id"); err != nil {
		t.Fatal(err)
	}
	res, _ = l.AllowAtMost(ctx, "id", limit, 0)
	if res.Allowed != 0 || res.Remaining != 10 || res.RetryAfter != -1 || res.ResetAfter != 0 {
		t.Fatalf("fresh peek %+v", res)
	}
}

// A Period that is not whole milliseconds is the same rate per whole milliseconds; Burst 0
// admits nothing; bad limits are errors, not calls.
func TestOddLimits(t *testing.T) {
	ctx := context.Background()
	l, _ := newLimiter(t)
	res, err := l.AllowN(ctx, "odd", redisrate.Limit{Rate: 3, Burst: 3, Period: 1500 * time.Microsecond}, 3)
	if err != nil || res.Allowed != 3 || res.Remaining != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	within(t, "ResetAfter", res.ResetAfter, 1500*time.Microsecond, time.Millisecond)
	res, err = l.Allow(ctx, "none", redisrate.Limit{Rate: 1, Burst: 0, Period: time.Second})
	if err != nil || res.Allowed != 0 || res.RetryAfter != time.Second {
		t.Fatalf("%+v %v", res, err)
	}
	if _, err := l.Allow(ctx, "bad", redisrate.Limit{Rate: 0, Burst: 1, Period: time.Second}); err == nil {
		t.Fatal("Rate 0 accepted")
	}
	if _, err := l.AllowN(ctx, "bad", redisrate.PerSecond(1), -1); err == nil {
		t.Fatal("negative n accepted")
	}
}

// 100 goroutines on one hot key: exactly the burst is admitted, never more, and every call
// is one module command.
func TestHotKeyNeverOverAdmits(t *testing.T) {
	ctx := context.Background()
	l, rdb := newLimiter(t)
	limit := redisrate.PerHour(250)
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
				res, err := l.AllowAtMost(ctx, "hot", limit, 2)
				if err != nil {
					t.Error(err)
					return
				}
				admitted.Add(int64(res.Allowed))
			}
		}()
	}
	wg.Wait()
	if got := admitted.Load(); got != 250 {
		t.Fatalf("admitted %d, want exactly the burst 250", got)
	}
	stats, _ := rdb.Info(ctx, "commandstats").Result()
	if !strings.Contains(stats, "cmdstat_rl.token:calls=1000,") {
		t.Fatalf("want 1000 RL.TOKEN calls: %s", stats)
	}
}

// Every call, Reset too, returns when its context ends under go-redis' defaults
// (ContextTimeoutEnabled false: it waited for the 3 s read timeout).
func TestContextHonoured(t *testing.T) {
	l, _ := newLimiter(t)
	admin := redis.NewClient(&redis.Options{Addr: addr})
	defer admin.Close()
	if err := admin.Do(context.Background(), "CLIENT", "PAUSE", 2500, "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	defer admin.Do(context.Background(), "CLIENT", "UNPAUSE")
	for name, call := range map[string]func(ctx context.Context) error{
		"Allow": func(ctx context.Context) error {
			_, err := l.Allow(ctx, "ctx", redisrate.PerSecond(10))
			return err
		},
		"Reset": func(ctx context.Context) error { return l.Reset(ctx, "ctx") },
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		start := time.Now()
		err := call(ctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) >= 2500*time.Millisecond {
			t.Fatalf("%s: %v after %v; want the context's deadline, before the pause ends", name, err, time.Since(start))
		}
	}
}

package limiterstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/store/tests"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/testserver"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/limiterstore"
)

var addr string

func TestMain(m *testing.M) { testserver.Main(m, &addr) }

func newStore(t *testing.T, prefix string) (limiter.Store, *redis.Client) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	store, err := limiterstore.NewStoreWithOptions(rdb, limiter.StoreOptions{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	return store, rdb
}

// ulule's shared sequential store test (drivers/store/tests), as its Redis driver runs it;
// make go-compat runs ulule's store_test.go itself (the concurrent test too: 250,000 calls)
// on every server.
func TestSharedSequentialAccess(t *testing.T) {
	store, _ := newStore(t, "limiter:sequential")
	tests.TestStoreSequentialAccess(t, store)
}

// The count is exact under goroutines, past the limit too (ulule decides on it), the window
// is the rate's period from the first count, and each call is one module command.
func TestCountsAndWindow(t *testing.T) {
	ctx := context.Background()
	store, rdb := newStore(t, "count")
	rate := limiter.Rate{Limit: 3, Period: time.Minute}
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	var last limiter.Context
	for i := 1; i <= 5; i++ {
		c, err := store.Increment(ctx, "k", 1, rate)
		if err != nil {
			t.Fatal(err)
		}
		last = c
		if c.Reached != (i > 3) || c.Remaining != max(0, int64(3-i)) {
			t.Fatalf("count %d: %+v", i, c)
		}
	}
	if reset := last.Reset - time.Now().Unix(); reset < 58 || reset > 61 {
		t.Fatalf("reset in %d s", reset)
	}
	pttl, _ := rdb.PTTL(ctx, "count:rl:k").Result()
	if pttl <= 58*time.Second || pttl > time.Minute {
		t.Fatalf("PTTL %v", pttl)
	}
	// A later call with another period leaves the window in force (the stock script's PEXPIRE
	// only on creation).
	if _, err := store.Increment(ctx, "k", 2, limiter.Rate{Limit: 3, Period: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if pttl, _ := rdb.PTTL(ctx, "count:rl:k").Result(); pttl > time.Minute {
		t.Fatalf("window moved: PTTL %v", pttl)
	}
	peek, _ := store.Peek(ctx, "k", rate)
	if peek.Remaining != 0 || !peek.Reached {
		t.Fatalf("peek %+v", peek)
	}
	stats, _ := rdb.Info(ctx, "commandstats").Result()
	if !contains(stats, "cmdstat_rl.period:calls=6,") || !contains(stats, "cmdstat_rl.peek:calls=1,") || contains(stats, "cmdstat_eval") {
		t.Fatalf("commands: %s", stats)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// A server without the module: the constructor fails (the stock driver's script load fails
// there too), instead of a store that errs on every request.
func TestNewStoreWithoutTheModule(t *testing.T) {
	s, err := testserver.StartWithoutModule()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	rdb := s.Client()
	defer rdb.Close()
	store, err := limiterstore.NewStore(rdb)
	if !errors.Is(err, ratelimit.ErrModuleNotLoaded) || store != nil {
		t.Fatalf("NewStore: %v, %v; want ErrModuleNotLoaded", store, err)
	}
}

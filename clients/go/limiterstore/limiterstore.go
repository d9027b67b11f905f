// Package limiterstore is a [limiter.Store] for github.com/ulule/limiter/v3 on the
// redis-ratelimit module, with the constructors of ulule's Redis driver (NewStore,
// NewStoreWithOptions): swap the import
//
//	import redis "github.com/redis-ratelimit/redis-ratelimit/clients/go/limiterstore"
//
// and ulule's own drivers/store/redis/store_test.go (the shared sequential and concurrent
// store tests) passes (make go-compat).
//
// The store counts and ulule's limiter decides, exactly as with the stock driver: each
// Get/Increment is one `RL.PERIOD <prefix>:<key> <ceiling> <period ms> [COST n] KEEPPERIOD` —
// a fixed window that starts at the key's first count and lasts the rate's period (a later
// call's other period leaves the window in force, as the stock script's PEXPIRE on creation
// does), counting up to a ceiling no threshold of ulule's reaches (2^32 − 1 when the rate's
// limit is below 2^31, else 10^12): INCRBY and PEXPIRE atomically, without Lua. Peek is
// RL.PEEK (read-only), Reset is DEL.
//
// What differs from the stock driver: the key is <prefix>:rl:<key> (beside the stock
// <prefix>:<key>: a running service switches without a WRONGTYPE, each key starting fresh)
// and holds a module value, not an integer string (read it with RL.PEEK / RL.INFO, not GET); a count that would pass the ceiling is not
// stored (the store then reports count + n, above every limit, so ulule decides the same);
// a period of 0 or less stands for ten years (the stock driver: no expiry); MaxRetry is
// ignored (as in the stock driver, where it is deprecated).
package limiterstore

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/store/common"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
)

// Client is the go-redis client the store sends through: a single node, cluster, ring or
// failover client (redis.UniversalClient).
type Client = redis.UniversalClient

const (
	// ceiling32 is the counter's ceiling when every threshold is below 2^31: the module then
	// keeps the counter in its 48-byte form.
	ceiling32 = 1<<32 - 1
	// unbounded is the module's largest count.
	unbounded = ratelimit.MaxCount
)

// Store is the store.
type Store struct {
	// Prefix used for the key.
	Prefix string
	// MaxRetry is ignored: every operation is one atomic command.
	MaxRetry int
	rl       *ratelimit.Client
}

// NewStore returns an instance of the store with ulule's defaults.
func NewStore(client Client) (limiter.Store, error) {
	return NewStoreWithOptions(client, limiter.StoreOptions{
		Prefix:          limiter.DefaultPrefix,
		CleanUpInterval: limiter.DefaultCleanUpInterval,
		MaxRetry:        limiter.DefaultMaxRetry,
	})
}

// NewStoreWithOptions returns an instance of the store with options (Prefix; MaxRetry is
// kept and ignored). Like the stock driver (which loads its scripts here), it asks the server
// once: a server it cannot reach, or one without the module ([ratelimit.ErrModuleNotLoaded]),
// fails here rather than on every request.
func NewStoreWithOptions(client Client, options limiter.StoreOptions) (limiter.Store, error) {
	store := &Store{Prefix: options.Prefix, MaxRetry: options.MaxRetry, rl: ratelimit.New(client)}
	if _, _, err := store.rl.Peek(context.Background(), store.cacheKey("")); err != nil {
		return nil, err
	}
	return store, nil
}

// namespace sits between the store's Prefix and the key: the drop-in's keys are
// <prefix>:rl:<key>, beside the stock driver's <prefix>:<key> integer strings, never on them,
// so a service switched on a live Redis meets no WRONGTYPE (ulule's default error handler
// would answer 500s, and the stock keys live a whole period); each key starts fresh at the
// switch.
const namespace = "rl:"

func (store *Store) cacheKey(key string) string {
	return store.Prefix + ":" + namespace + key
}

func window(rate limiter.Rate) ratelimit.Period {
	ceiling := int64(unbounded)
	if rate.Limit >= 0 && rate.Limit < 1<<31 {
		ceiling = ceiling32
	}
	period := rate.Period
	switch {
	case period <= 0 || period > ratelimit.MaxDuration:
		period = ratelimit.MaxDuration
	case period%time.Millisecond != 0:
		period = period.Truncate(time.Millisecond) + time.Millisecond
	}
	return ratelimit.Period{Limit: ceiling, Period: period, KeepPeriod: true}
}

// Increment increments the limit by given count & gives back the new limit for given identifier
func (store *Store) Increment(ctx context.Context, key string, count int64, rate limiter.Rate) (limiter.Context, error) {
	d, err := store.rl.Limit(ctx, store.cacheKey(key), window(rate), ratelimit.Cost(count))
	if err != nil {
		return limiter.Context{}, err
	}
	counted := d.Limit - d.Remaining
	if !d.Allowed {
		counted += count
	}
	return state(rate, d.ResetAfter, counted), nil
}

// Get returns the limit for given identifier.
func (store *Store) Get(ctx context.Context, key string, rate limiter.Rate) (limiter.Context, error) {
	return store.Increment(ctx, key, 1, rate)
}

// Peek returns the limit for given identifier, without modification on current values.
func (store *Store) Peek(ctx context.Context, key string, rate limiter.Rate) (limiter.Context, error) {
	d, ok, err := store.rl.Peek(ctx, store.cacheKey(key))
	if err != nil {
		return limiter.Context{}, err
	}
	if !ok {
		return state(rate, 0, 0), nil
	}
	// RL.PEEK answers a DRYRUN COST 1: an admitted one took 1 off remaining.
	counted := d.Limit - d.Remaining
	if d.Allowed {
		counted--
	}
	return state(rate, d.ResetAfter, counted), nil
}

// Reset returns the limit for given identifier which is set to zero.
func (store *Store) Reset(ctx context.Context, key string, rate limiter.Rate) (limiter.Context, error) {
	if _, err := store.rl.Do(ctx, 1, "DEL", store.cacheKey(key)); err != nil {
		return limiter.Context{}, err
	}
	return state(rate, 0, 0), nil
}

// state is ulule's context for a count whose window ends after ttl (0: a new window).
func state(rate limiter.Rate, ttl time.Duration, count int64) limiter.Context {
	now := time.Now()
	expiration := now.Add(rate.Period)
	if ttl > 0 {
		expiration = now.Add(ttl)
	}
	return common.GetContextFromState(now, rate, expiration, count)
}

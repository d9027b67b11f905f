// Package redisrate is a drop-in for github.com/go-redis/redis_rate/v10 on the
// redis-ratelimit module: the same exported API and semantics (GCRA: Rate events per Period,
// bursts up to Burst), one module command per call instead of a Lua script.
//
// Swap the import:
//
//	import redis_rate "github.com/redis-ratelimit/redis-ratelimit/clients/go/redisrate"
//
// and redis_rate's own rate_test.go passes (make go-compat). The mapping: a limiter of
// Limit{Rate, Burst, Period} on key k is `RL.TOKEN rate:k Burst Rate Period` — a smooth
// token bucket of Burst tokens refilled at Rate per Period is exactly redis_rate's GCRA
// (emission interval Period/Rate, burst offset Burst × interval): the same admissions, the
// same Remaining (whole permits left), RetryAfter (-1 when allowed) and ResetAfter. AllowN
// sends `COST n`, AllowAtMost `ATMOST n` (what is left, up to n, taken atomically).
//
// What differs from the stock library (README "Go"): the key is rate:rl:<key>, beside the
// stock rate:<key> (a running service switches without a WRONGTYPE; each key starts fresh at
// the switch, and the stock keys expire by themselves); times are exact and rounded up to whole
// milliseconds (redis_rate's Lua computes in float seconds on the server clock); the key
// holds a module value, not a float string; AllowAtMost takes whole permits only (the Lua
// script also takes the fraction of a permit that has refilled); the key expires at the exact
// instant the limiter is full again (the Lua script: whole seconds, rounded up). A Period
// that is not whole milliseconds is sent as an equivalent rate per whole milliseconds.
package redisrate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
)

// redisPrefix is where the drop-in keeps its limiters: beside redis_rate's own "rate:<key>"
// strings, never on them, so a service switched on a live Redis meets no WRONGTYPE; each key
// starts fresh at the switch (README "Go": "Switching a running service").
const redisPrefix = "rate:rl:"

// Limit is Rate events per Period with bursts of up to Burst.
type Limit struct {
	Rate   int
	Burst  int
	Period time.Duration
}

func (l Limit) String() string {
	return fmt.Sprintf("%d req/%s (burst %d)", l.Rate, fmtDur(l.Period), l.Burst)
}

// IsZero reports whether l is the zero Limit.
func (l Limit) IsZero() bool {
	return l == Limit{}
}

func fmtDur(d time.Duration) string {
	switch d {
	case time.Second:
		return "s"
	case time.Minute:
		return "m"
	case time.Hour:
		return "h"
	}
	return d.String()
}

// PerSecond is rate events per second, bursts of rate.
func PerSecond(rate int) Limit {
	return Limit{Rate: rate, Period: time.Second, Burst: rate}
}

// PerMinute is rate events per minute, bursts of rate.
func PerMinute(rate int) Limit {
	return Limit{Rate: rate, Period: time.Minute, Burst: rate}
}

// PerHour is rate events per hour, bursts of rate.
func PerHour(rate int) Limit {
	return Limit{Rate: rate, Period: time.Hour, Burst: rate}
}

// Limiter controls how frequently events are allowed to happen.
type Limiter struct {
	rl *ratelimit.Client
}

// NewLimiter returns a new Limiter over rdb (a client, cluster client, ring or failover
// client of go-redis v9).
func NewLimiter(rdb redis.UniversalClient) *Limiter {
	return &Limiter{rl: ratelimit.New(rdb)}
}

// Allow is a shortcut for AllowN(ctx, key, limit, 1).
func (l Limiter) Allow(ctx context.Context, key string, limit Limit) (*Result, error) {
	return l.AllowN(ctx, key, limit, 1)
}

// AllowN reports whether n events may happen at time now.
func (l Limiter) AllowN(ctx context.Context, key string, limit Limit, n int) (*Result, error) {
	return l.allow(ctx, key, limit, n, false)
}

// AllowAtMost reports whether at most n events may happen at time now.
// It returns number of allowed events that is less than or equal to n.
func (l Limiter) AllowAtMost(ctx context.Context, key string, limit Limit, n int) (*Result, error) {
	return l.allow(ctx, key, limit, n, true)
}

// Reset gets a key and reset all limitations and previous usages
func (l *Limiter) Reset(ctx context.Context, key string) error {
	_, err := l.rl.Do(ctx, 1, "DEL", redisPrefix+key)
	return err
}

// Result is the answer to one call.
type Result struct {
	// Limit is the limit that was used to obtain this result.
	Limit Limit

	// Allowed is the number of events that may happen at time now.
	Allowed int

	// Remaining is the maximum number of requests that could be
	// permitted instantaneously for this key given the current
	// state. For example, if a rate limiter allows 10 requests per
	// second and has already received 6 requests for this key this
	// second, Remaining would be 4.
	Remaining int

	// RetryAfter is the time until the next request will be permitted.
	// It should be -1 unless the rate limit has been exceeded.
	RetryAfter time.Duration

	// ResetAfter is the time until the RateLimiter returns to its
	// initial state for a given key. For example, if a rate limiter
	// manages requests per second and received one request 200ms ago,
	// Reset would return 800ms. You can also think of this as the time
	// until Limit and Remaining will be equal.
	ResetAfter time.Duration
}

// bucket is the token bucket of limit: Rate tokens per a whole number of ms (scaled when
// Period is not whole ms).
func bucket(limit Limit) (ratelimit.Token, error) {
	if limit.Rate <= 0 || limit.Period <= 0 || limit.Burst < 0 {
		return ratelimit.Token{}, fmt.Errorf("redisrate: %v: Rate and Period must be positive, Burst not negative", limit)
	}
	rate, period := int64(limit.Rate), int64(limit.Period)
	const ms = int64(time.Millisecond)
	g := gcd(period, ms)
	scale := ms / g
	if rate > ratelimit.MaxCount/scale {
		return ratelimit.Token{}, fmt.Errorf("redisrate: %v cannot be expressed per whole milliseconds", limit)
	}
	return ratelimit.Token{
		Capacity: int64(limit.Burst),
		Rate:     rate * scale,
		Period:   time.Duration(period/g) * time.Millisecond,
	}, nil
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// interval is the emission interval of limit: Period / Rate.
func interval(limit Limit) float64 {
	return float64(limit.Period) / float64(limit.Rate)
}

func (l Limiter) allow(ctx context.Context, key string, limit Limit, n int, atMost bool) (*Result, error) {
	if n < 0 {
		return nil, errors.New("redisrate: n must not be negative")
	}
	token, err := bucket(limit)
	if err != nil {
		return nil, err
	}
	if limit.Burst == 0 {
		// A bucket of no tokens admits nothing (the module's capacity starts at 1).
		res := &Result{Limit: limit, RetryAfter: -1}
		if n > 0 && !atMost {
			res.RetryAfter = time.Duration(float64(n) * interval(limit))
		} else if n > 0 || atMost {
			res.RetryAfter = time.Duration(interval(limit))
		}
		return res, nil
	}
	opt := ratelimit.Cost(int64(n))
	if atMost {
		opt = ratelimit.AtMost(int64(n))
	}
	d, err := l.rl.Limit(ctx, redisPrefix+key, token, opt)
	if err != nil {
		return nil, err
	}
	res := &Result{Limit: limit, ResetAfter: d.ResetAfter}
	if d.Allowed {
		res.Allowed = int(d.Taken)
		res.Remaining = int(d.Remaining)
		res.RetryAfter = -1
		return res, nil
	}
	res.RetryAfter = d.RetryAfter
	if d.RetryAfter == ratelimit.Never {
		// n above the burst: redis_rate still names the instant n events' worth of time
		// would have passed, the wait for a full bucket plus (n - Burst) intervals.
		res.RetryAfter = d.ResetAfter + time.Duration(float64(n-limit.Burst)*interval(limit))
	}
	return res, nil
}

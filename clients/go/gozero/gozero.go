// Package gozero is a drop-in for go-zero's core/limit (PeriodLimit and TokenLimiter) on the
// redis-ratelimit module: the same constructors' parameters — the store is go-zero's own
// *redis.Redis (its breaker, logging and metrics apply, as with go-zero's constructors) or a
// go-redis v9 client — method sets and result codes, one module command per call instead of a
// Lua script, judged on the server's clock.
//
//   - PeriodLimit is `RL.PERIOD <keyPrefix>rl:<key> <quota> <period>s` (with Align: `ALIGN
//     <this process's UTC offset>`): a window starts at its first request (or at local
//     calendar boundaries), and the codes are go-zero's: Allowed while permits are left after
//     the request, HitQuota for the request that takes the last one, OverQuota after.
//   - TokenLimiter is `RL.TOKEN {<key>}.bucket <burst> <rate> 1s [COST n]`: a token bucket
//     refilled continuously on the server's clock, in exact arithmetic. go-zero's script takes
//     the client's clock in whole seconds (its AllowN's now.Unix()), which admits up to twice
//     the rate across a second boundary (go-zero #1451) and lets reordered requests from
//     skewed clocks refill what was spent (#4072); here `now` is not used at all.
//
// What else differs (README "Go"): a PeriodLimit keeps <keyPrefix>rl:<key>, beside go-zero's
// <keyPrefix><key> counter (which lives up to a period, a day for daily quotas), so that a
// service switched on a live Redis meets no WRONGTYPE, each key starting fresh; a
// TokenLimiter keeps one key, {key}.bucket, instead of {key}.tokens and {key}.ts (the names
// differ so that a rolling deploy never mixes the two formats); when Redis fails, TokenLimiter refuses (go-zero silently falls back to an
// in-process limiter per instance: [Rescue] keeps that behaviour, [FailOpen] admits) and
// reports the error to [OnError]; a quota of 0 is OverQuota without a call.
package gozero

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	xrate "golang.org/x/time/rate"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
)

const (
	// Unknown means not initialized state.
	Unknown = iota
	// Allowed means allowed state.
	Allowed
	// HitQuota means this request exactly hit the quota.
	HitQuota
	// OverQuota means passed the quota.
	OverQuota
)

// ErrUnknownCode is an error that represents unknown status code.
var ErrUnknownCode = errors.New("unknown status code")

// ErrStore means the constructors were given a store that is neither go-zero's *redis.Redis
// nor a go-redis v9 client; every call then fails with it.
var ErrStore = errors.New("gozero: the store must be go-zero's *redis.Redis or a go-redis v9 redis.UniversalClient")

// Store is what the constructors take: go-zero's own *redis.Redis (commands go through its
// DoCtx, so its breaker, logging and metrics apply) or a go-redis v9 redis.UniversalClient
// (commands sent once, within the caller's context). Anything else: every call fails with
// [ErrStore].
type Store = any

// client is the module's client over store.
func client(store Store) (*ratelimit.Client, error) {
	switch s := store.(type) {
	case redis.UniversalClient:
		return ratelimit.New(s), nil
	case ratelimit.Doer:
		return ratelimit.NewWithDoer(s), nil
	default:
		return nil, fmt.Errorf("%w (got %T)", ErrStore, store)
	}
}

type (
	// PeriodOption defines the method to customize a PeriodLimit.
	PeriodOption func(l *PeriodLimit)

	// A PeriodLimit is used to limit requests during a period of time.
	PeriodLimit struct {
		period    int
		quota     int
		rl        *ratelimit.Client
		storeErr  error
		keyPrefix string
		align     bool
	}
)

// NewPeriodLimit returns a PeriodLimit of quota requests per period seconds per key.
// limitStore is go-zero's *redis.Redis or a go-redis client ([Store]).
func NewPeriodLimit(period, quota int, limitStore Store, keyPrefix string,
	opts ...PeriodOption) *PeriodLimit {
	rl, err := client(limitStore)
	limiter := &PeriodLimit{
		period:    period,
		quota:     quota,
		rl:        rl,
		storeErr:  err,
		keyPrefix: keyPrefix,
	}
	for _, opt := range opts {
		opt(limiter)
	}
	return limiter
}

// periodNamespace sits between a PeriodLimit's keyPrefix and the key (see the package doc).
const periodNamespace = "rl:"

// Align returns a func to customize a PeriodLimit with alignment: windows start at the local
// calendar boundaries of this process's time zone (ALIGN with its UTC offset). For example,
// 5 sms verification messages every day, counted per local day.
func Align() PeriodOption {
	return func(l *PeriodLimit) {
		l.align = true
	}
}

// Take requests a permit, it returns the permit state.
func (h *PeriodLimit) Take(key string) (int, error) {
	return h.TakeCtx(context.Background(), key)
}

// TakeCtx requests a permit with context, it returns the permit state.
func (h *PeriodLimit) TakeCtx(ctx context.Context, key string) (int, error) {
	if h.storeErr != nil {
		return Unknown, h.storeErr
	}
	if h.period <= 0 {
		return Unknown, fmt.Errorf("gozero: period must be positive seconds (got %d)", h.period)
	}
	if h.quota <= 0 {
		return OverQuota, nil
	}
	window := ratelimit.Period{Limit: int64(h.quota), Period: time.Duration(h.period) * time.Second}
	if h.align {
		_, offset := time.Now().Zone()
		window.Align = true
		window.UTCOffset = (time.Duration(offset) * time.Second) % window.Period
	}
	d, err := h.rl.Limit(ctx, h.keyPrefix+periodNamespace+key, window)
	switch {
	case err != nil:
		return Unknown, err
	case !d.Allowed:
		return OverQuota, nil
	case d.Remaining == 0:
		return HitQuota, nil
	default:
		return Allowed, nil
	}
}

// TokenOption customizes a TokenLimiter.
type TokenOption func(*TokenLimiter)

// FailOpen makes a TokenLimiter admit when Redis fails (default: refuse).
func FailOpen() TokenOption { return func(l *TokenLimiter) { l.onFailure = failOpen } }

// Rescue makes a TokenLimiter judge in this process when Redis fails, with a local token
// bucket of the same rate and burst, until Redis answers PING again (go-zero's behaviour; not
// shared between instances).
func Rescue() TokenOption { return func(l *TokenLimiter) { l.onFailure = rescue } }

// OnError is called with every error a TokenLimiter meets (Redis down, a deadline, …).
func OnError(fn func(error)) TokenOption { return func(l *TokenLimiter) { l.onError = fn } }

const (
	failClosed = iota
	failOpen
	rescue
)

// pingInterval is how often a rescuing TokenLimiter checks whether Redis is back.
const pingInterval = 100 * time.Millisecond

// A TokenLimiter controls how frequently events are allowed to happen with in one second.
type TokenLimiter struct {
	rate      int
	burst     int
	rl        *ratelimit.Client
	storeErr  error
	key       string
	onFailure int
	onError   func(error)

	rescueLock     sync.Mutex
	redisAlive     atomic.Bool
	monitorStarted bool
	rescueLimiter  *xrate.Limiter
}

// NewTokenLimiter returns a new TokenLimiter that allows events up to rate per second and
// permits bursts of at most burst tokens; store is go-zero's *redis.Redis or a go-redis
// client ([Store]).
func NewTokenLimiter(rate, burst int, store Store, key string, opts ...TokenOption) *TokenLimiter {
	rl, err := client(store)
	lim := &TokenLimiter{
		rate:     rate,
		burst:    burst,
		rl:       rl,
		storeErr: err,
		key:      "{" + key + "}.bucket",
	}
	lim.redisAlive.Store(true)
	if rate > 0 {
		lim.rescueLimiter = xrate.NewLimiter(xrate.Every(time.Second/time.Duration(rate)), burst)
	}
	for _, opt := range opts {
		opt(lim)
	}
	return lim
}

// Allow is shorthand for AllowN(time.Now(), 1).
func (lim *TokenLimiter) Allow() bool {
	return lim.AllowN(time.Now(), 1)
}

// AllowCtx is shorthand for AllowNCtx(ctx, time.Now(), 1) with incoming context.
func (lim *TokenLimiter) AllowCtx(ctx context.Context) bool {
	return lim.AllowNCtx(ctx, time.Now(), 1)
}

// AllowN reports whether n events may happen now. now is not used: the server's clock
// judges (go-zero sends now.Unix()).
func (lim *TokenLimiter) AllowN(now time.Time, n int) bool {
	return lim.reserveN(context.Background(), now, n)
}

// AllowNCtx reports whether n events may happen now with incoming context; now is not used.
func (lim *TokenLimiter) AllowNCtx(ctx context.Context, now time.Time, n int) bool {
	return lim.reserveN(ctx, now, n)
}

func (lim *TokenLimiter) reserveN(ctx context.Context, now time.Time, n int) bool {
	if lim.rate <= 0 || lim.burst <= 0 || n < 0 {
		return false
	}
	if lim.storeErr != nil {
		if lim.onError != nil {
			lim.onError(lim.storeErr)
		}
		return false
	}
	if !lim.redisAlive.Load() {
		return lim.rescueLimiter.AllowN(now, n)
	}
	d, err := lim.rl.Limit(ctx, lim.key,
		ratelimit.Token{Capacity: int64(lim.burst), Rate: int64(lim.rate), Period: time.Second},
		ratelimit.Cost(int64(n)))
	if err == nil {
		return d.Allowed
	}
	if lim.onError != nil {
		lim.onError(err)
	}
	if ctx.Err() != nil || errors.Is(err, ratelimit.ErrDeadline) {
		// The caller gave up (as go-zero: refused, no rescue).
		return false
	}
	var se *ratelimit.ServerError
	switch {
	case errors.As(err, &se) && se.Code != "LOADING" && se.Code != "READONLY" && se.Code != "MASTERDOWN":
		// The server answered (a bad argument, WRONGTYPE): no rescue would be right.
		return false
	case lim.onFailure == failOpen:
		return true
	case lim.onFailure == rescue:
		lim.startMonitor()
		return lim.rescueLimiter.AllowN(now, n)
	default:
		return false
	}
}

func (lim *TokenLimiter) startMonitor() {
	lim.rescueLock.Lock()
	defer lim.rescueLock.Unlock()
	if lim.monitorStarted {
		return
	}
	lim.monitorStarted = true
	lim.redisAlive.Store(false)
	go lim.waitForRedis()
}

func (lim *TokenLimiter) waitForRedis() {
	ticker := time.NewTicker(pingInterval)
	defer func() {
		ticker.Stop()
		lim.rescueLock.Lock()
		lim.monitorStarted = false
		lim.rescueLock.Unlock()
	}()
	for range ticker.C {
		ctx, cancel := context.WithTimeout(context.Background(), pingInterval)
		_, err := lim.rl.Do(ctx, 0, "PING")
		cancel()
		if err == nil {
			lim.redisAlive.Store(true)
			return
		}
	}
}

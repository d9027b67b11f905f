// Package httplimit is net/http middleware on the redis-ratelimit module: one module command
// per request, the IETF headers of draft-ietf-httpapi-ratelimit-headers-10 on every reply
//
//	RateLimit-Policy: "default";q=100;w=60     quota q per window of w seconds
//	RateLimit: "default";r=42;t=17             r left, t seconds until the limiter resets
//
// and, on a refused request, 429 with Retry-After (seconds, rounded up) and a JSON body
// (unless Options.Refused answers). It works with the standard mux and anything that takes
// func(http.Handler) http.Handler (chi, gorilla/mux, alice); for gin, echo and the like,
// [Limiter.Check] decides and writes the headers, and the handler aborts when it is false.
//
// Keys. A middleware with a limit of its own writes `rl:<algorithm>:<8 hex digits>:<tenant>`,
// where the hex digits are a SHA-256 of the command and its parameters (the Node package's
// namespace for the same limit); one on a server policy (Options.Policy without a Limit)
// writes `ratelimit:<tenant>`, the key the Node and Python middlewares write for the same
// tenant — the policy name is not in the key, so a tenant that changes tier keeps its
// counter. The tenant is Options.Key's result, by default the client's address as
// [AddressKey] gives it.
//
// Redis down or slow: each decision waits at most Options.Timeout (default 500 ms; the call
// carries DEADLINE, so one that arrives late counts nothing), then the request is let
// through with Options.FailOpen, else answered 503 (or by Options.Error). Either way
// Options.OnError is told, and the failure is logged (Options.Logger, at most one line per
// Options.LogEvery, with the count of failures meanwhile).
package httplimit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
)

// DefaultTimeout bounds each decision unless Options.Timeout says otherwise.
const DefaultTimeout = 500 * time.Millisecond

// ServerPolicyPrefix is the key prefix of a middleware on a server policy (clients/key-layout.json).
const ServerPolicyPrefix = "ratelimit:"

// policyCacheFor is how long a server policy's definition (for RateLimit-Policy's w) is reused.
const policyCacheFor = 5 * time.Second

// Options configure a [Limiter].
type Options struct {
	// Client sends the commands (ratelimit.New(rdb)); or Redis, a go-redis client.
	Client *ratelimit.Client
	Redis  redis.UniversalClient
	// Limit is the middleware's own limit. Nil with Policy set: the server's policy of that
	// name is the limit (RL.HIT).
	Limit ratelimit.Limit
	// Policy is the name in the headers (default "default") and, without a Limit, the server
	// policy judged.
	Policy string
	// Key gives the request's tenant; "" (or Key nil) means the client's address.
	Key func(r *http.Request) (string, error)
	// Cost gives the request's cost (default 1).
	Cost func(r *http.Request) (int64, error)
	// Prefix replaces the default key prefix (see the package docs).
	Prefix *string
	// ClientAddress gives the client's address for the default key (default: r.RemoteAddr's
	// host; behind a proxy, read its header here).
	ClientAddress func(r *http.Request) string
	// IPv6Subnet is the prefix length an IPv6 client is grouped by (default 56; 128: the whole
	// address).
	IPv6Subnet int
	// Timeout bounds each decision (default DefaultTimeout; negative: no bound but the
	// request's own context).
	Timeout time.Duration
	// FailOpen lets a request through when the decision fails (Redis down, the timeout).
	FailOpen bool
	// Ban locks a tenant out for this long once the limit refuses it (BAN); own limits only.
	Ban time.Duration
	// Skip exempts requests (health checks) from limiting.
	Skip func(r *http.Request) bool
	// Refused answers a refused request instead of the default 429 (the headers are set).
	Refused func(w http.ResponseWriter, r *http.Request, d ratelimit.Decision)
	// Error answers a request whose decision failed, when not FailOpen (default: 503).
	Error func(w http.ResponseWriter, r *http.Request, err error)
	// OnError is told of every failed decision, with FailOpen or without, before the request
	// is let through or answered (metrics, tracing); it must not write the response.
	OnError func(r *http.Request, err error)
	// Logger logs failed decisions, rate-limited: the first at once, then at most one line
	// per LogEvery with how many failed meanwhile (default slog.Default()).
	Logger *slog.Logger
	// LogEvery is the least time between two log lines (default DefaultLogEvery; negative:
	// never log).
	LogEvery time.Duration
}

// DefaultLogEvery is the least time between two log lines about failed decisions.
const DefaultLogEvery = 10 * time.Second

// errorLog logs failed decisions, at most one line per every.
type errorLog struct {
	logger *slog.Logger
	every  time.Duration

	mu       sync.Mutex
	last     time.Time
	failures int64 // failed decisions not yet logged
}

func (e *errorLog) log(r *http.Request, err error, failOpen bool) {
	if e.every < 0 {
		return
	}
	e.mu.Lock()
	e.failures++
	now := time.Now()
	if !e.last.IsZero() && now.Sub(e.last) < e.every {
		e.mu.Unlock()
		return
	}
	failures := e.failures
	e.last, e.failures = now, 0
	e.mu.Unlock()
	action := "answered 503"
	if failOpen {
		action = "let through (FailOpen)"
	}
	e.logger.LogAttrs(r.Context(), slog.LevelError, "httplimit: rate limit decision failed; request "+action,
		slog.String("error", err.Error()), slog.Int64("failures", failures), slog.String("path", r.URL.Path))
}

// Limiter is the middleware.
type Limiter struct {
	o            Options
	rl           *ratelimit.Client
	onPolicy     bool
	policy       string
	prefix       string
	policyHeader string // own limit: fixed; server policy: from each reply
	subnet       int
	timeout      time.Duration
	// delays: the own limit is a leaky bucket in delay mode (admitted requests wait).
	delays bool
	errs   *errorLog
}

// ErrTimeout means no decision came within Options.Timeout.
var ErrTimeout = errors.New("httplimit: no decision from Redis within the timeout")

// New checks the options and returns the middleware.
func New(o Options) (*Limiter, error) {
	rl := o.Client
	if rl == nil {
		if o.Redis == nil {
			return nil, errors.New("httplimit: Options needs Client or Redis")
		}
		rl = ratelimit.New(o.Redis)
	}
	l := &Limiter{o: o, rl: rl, policy: o.Policy, timeout: o.Timeout}
	if l.policy == "" {
		l.policy = "default"
	}
	if l.timeout == 0 {
		l.timeout = DefaultTimeout
	}
	l.errs = &errorLog{logger: o.Logger, every: o.LogEvery}
	if l.errs.logger == nil {
		l.errs.logger = slog.Default()
	}
	if l.errs.every == 0 {
		l.errs.every = DefaultLogEvery
	}
	switch {
	case o.IPv6Subnet == 0:
		l.subnet = 56
	case o.IPv6Subnet < 1 || o.IPv6Subnet > 128:
		return nil, fmt.Errorf("httplimit: IPv6Subnet must be 1 … 128 (got %d)", o.IPv6Subnet)
	default:
		l.subnet = o.IPv6Subnet
	}
	var defaultPrefix string
	switch {
	case o.Limit == nil && o.Policy == "":
		return nil, errors.New("httplimit: Options needs a Limit, or the name of a server Policy")
	case o.Limit == nil:
		if o.Ban != 0 {
			return nil, errors.New("httplimit: Ban belongs to the server policy (RL.POLICY SET … BAN d), not to the middleware")
		}
		l.onPolicy = true
		defaultPrefix = ServerPolicyPrefix
	default:
		// Validate the limit at setup, not on the first request.
		args, err := commandArgs(o.Limit, o.Ban)
		if err != nil {
			return nil, err
		}
		if leaky, ok := o.Limit.(ratelimit.Leaky); ok && !leaky.NoDelay {
			l.delays = true
		}
		q, w := o.Limit.Quota()
		l.policyHeader = ratelimit.PolicyHeader(l.policy, q, w)
		sum := sha256.Sum256([]byte(o.Limit.Command() + "\x00" + strings.Join(args, "\x00")))
		defaultPrefix = "rl:" + strings.ToLower(strings.TrimPrefix(o.Limit.Command(), "RL.")) + ":" + hex.EncodeToString(sum[:])[:8] + ":"
	}
	l.prefix = defaultPrefix
	if o.Prefix != nil {
		l.prefix = *o.Prefix
	}
	return l, nil
}

// commandArgs are the arguments after the key the command of an own limit sends (the limit's
// parameters and options, BAN), as strings: what its default namespace hashes, as the Node
// package does.
func commandArgs(limit ratelimit.Limit, ban time.Duration) ([]string, error) {
	args, err := ratelimit.LimitArgs(limit)
	if err != nil {
		return nil, err
	}
	if ban != 0 {
		if ban < time.Millisecond || ban%time.Millisecond != 0 {
			return nil, fmt.Errorf("httplimit: Ban must be whole milliseconds (got %v)", ban)
		}
		args = append(args, "BAN", strconv.FormatInt(ban.Milliseconds(), 10))
	}
	return args, nil
}

// Handler wraps next: a request is passed on when admitted.
func (l *Limiter) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if l.Check(w, r) {
			next.ServeHTTP(w, r)
		}
	})
}

// Middleware is Handler as a func(http.Handler) http.Handler value (chi's r.Use, alice).
func (l *Limiter) Middleware() func(http.Handler) http.Handler { return l.Handler }

// Check decides r: it sets the headers and returns true when the request may proceed (after
// a leaky bucket's delay, slept here); otherwise it has answered (429, or the error reply)
// and returns false.
func (l *Limiter) Check(w http.ResponseWriter, r *http.Request) bool {
	if l.o.Skip != nil && l.o.Skip(r) {
		return true
	}
	d, err := l.decide(r)
	if err != nil {
		count(l.policy, outcomeError)
		if l.o.OnError != nil {
			l.o.OnError(r, err)
		}
		l.errs.log(r, err, l.o.FailOpen)
		if l.o.FailOpen {
			return true
		}
		if l.o.Error != nil {
			l.o.Error(w, r, err)
		} else {
			http.Error(w, "rate limiter unavailable", http.StatusServiceUnavailable)
		}
		return false
	}
	h := w.Header()
	h.Set("RateLimit-Policy", l.policyHeaderOf(d))
	h.Set("RateLimit", d.Header(l.policy))
	if d.Allowed {
		count(l.policy, outcomeAdmitted)
		if d.RetryAfter > 0 && l.delays {
			// A leaky bucket in delay mode: the request proceeds after the water ahead of it.
			// (Nothing else delays: a SHADOW policy's would-be refusal is admitted with a
			// retry time, and is let through at once.)
			t := time.NewTimer(d.RetryAfter)
			defer t.Stop()
			select {
			case <-t.C:
			case <-r.Context().Done():
				return false
			}
		}
		return true
	}
	count(l.policy, outcomeLimited)
	if v, ok := d.RetryAfterHeader(); ok {
		h.Set("Retry-After", v)
	}
	if l.o.Refused != nil {
		l.o.Refused(w, r, d)
		return false
	}
	retry := int64(-1)
	if d.RetryAfter >= 0 {
		retry = d.RetryAfter.Milliseconds()
	}
	body, _ := json.Marshal(map[string]any{"error": "too many requests", "retryAfterMs": retry})
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write(body)
	return false
}

// Key is the full key r is counted under.
func (l *Limiter) Key(r *http.Request) (string, error) {
	tenant := ""
	if l.o.Key != nil {
		k, err := l.o.Key(r)
		if err != nil {
			return "", err
		}
		tenant = k
	}
	if tenant == "" {
		address := ""
		if l.o.ClientAddress != nil {
			address = l.o.ClientAddress(r)
		} else {
			address = RemoteAddress(r)
		}
		tenant = AddressKey(address, l.subnet)
	}
	return l.prefix + tenant, nil
}

type decided struct {
	d   ratelimit.Decision
	err error
}

// decide makes the one module call, bounded by the timeout even when the client ignores the
// context (the call then finishes in the background).
func (l *Limiter) decide(r *http.Request) (ratelimit.Decision, error) {
	key, err := l.Key(r)
	if err != nil {
		return ratelimit.Decision{}, err
	}
	cost := int64(1)
	if l.o.Cost != nil {
		if cost, err = l.o.Cost(r); err != nil {
			return ratelimit.Decision{}, err
		}
	}
	ctx := r.Context()
	if l.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.timeout)
		defer cancel()
	}
	wait := func() {}
	if l.onPolicy {
		wait = l.refreshPolicy(ctx)
	}
	defer wait()
	done := make(chan decided, 1)
	go func() {
		var res decided
		if l.onPolicy {
			res.d, res.err = l.rl.Hit(ctx, l.policy, key, ratelimit.Cost(cost))
		} else {
			opts := []ratelimit.Option{ratelimit.Cost(cost)}
			if l.o.Ban != 0 {
				opts = append(opts, ratelimit.Ban(l.o.Ban))
			}
			res.d, res.err = l.rl.Limit(ctx, key, l.o.Limit, opts...)
		}
		done <- res
	}()
	select {
	case res := <-done:
		if res.err != nil && (ctx.Err() != nil || errors.Is(res.err, context.DeadlineExceeded)) && r.Context().Err() == nil {
			return res.d, fmt.Errorf("%w (%v): %v", ErrTimeout, l.timeout, res.err)
		}
		return res.d, res.err
	case <-ctx.Done():
		if r.Context().Err() == nil {
			return ratelimit.Decision{}, fmt.Errorf("%w (%v)", ErrTimeout, l.timeout)
		}
		return ratelimit.Decision{}, ctx.Err()
	}
}

// RateLimit-Policy of a decision: the own limit's, or the server policy's quota (from the
// reply) and window (from its definition, when the reply is under it and not under a key's
// override of another quota).
func (l *Limiter) policyHeaderOf(d ratelimit.Decision) string {
	if l.policyHeader != "" {
		return l.policyHeader
	}
	if p, ok := policies.get(l.rl, l.policy); ok && p.known && p.q == d.Limit {
		return ratelimit.PolicyHeader(l.policy, d.Limit, p.w)
	}
	return ratelimit.PolicyHeader(l.policy, d.Limit, 0)
}

// refreshPolicy reads the server policy's definition beside the first decision (in parallel
// with it: the returned func waits for the read), and again in the background once it is
// older than policyCacheFor — one module command per decision on the hot path.
func (l *Limiter) refreshPolicy(ctx context.Context) (wait func()) {
	entry, fresh := policies.claim(l.rl, l.policy)
	if fresh {
		return func() {}
	}
	first := entry.readAt.IsZero()
	if !first {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.Background(), DefaultTimeout)
		go func() {
			defer cancel()
			def, err := l.rl.GetPolicy(ctx, l.policy, "")
			policies.set(l.rl, l.policy, quotaOf(def, err))
		}()
		return func() {}
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		def, err := l.rl.GetPolicy(ctx, l.policy, "")
		policies.set(l.rl, l.policy, quotaOf(def, err))
	}()
	return func() {
		select {
		case <-read:
		case <-ctx.Done():
		}
	}
}

// policyQuota is what a server policy allows, for RateLimit-Policy.
type policyQuota struct {
	known  bool
	q      int64
	w      time.Duration
	readAt time.Time
}

func quotaOf(def map[string]any, err error) policyQuota {
	p := policyQuota{readAt: time.Now()}
	if err != nil || def == nil {
		return p
	}
	n := func(k string) int64 { v, _ := def[k].(int64); return v }
	switch def["algorithm"] {
	case "token", "leaky":
		if n("rate") > 0 {
			p.known, p.q = true, n("capacity")
			p.w = time.Duration(float64(n("capacity")) * float64(n("period_ms")) / float64(n("rate")) * float64(time.Millisecond))
		}
	case "period":
		p.known, p.q, p.w = true, n("limit"), time.Duration(n("period_ms"))*time.Millisecond
	case "slide":
		p.known, p.q, p.w = true, n("limit"), time.Duration(n("window_ms"))*time.Millisecond
	}
	return p
}

// policyCache: server policies' quotas per client and name, shared by the process.
type policyCache struct {
	mu sync.Mutex
	m  map[policyKey]policyQuota
	// reading: a read in flight
	reading map[policyKey]bool
}

type policyKey struct {
	rl   *ratelimit.Client
	name string
}

var policies = &policyCache{m: map[policyKey]policyQuota{}, reading: map[policyKey]bool{}}

func (c *policyCache) get(rl *ratelimit.Client, name string) (policyQuota, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.m[policyKey{rl, name}]
	return p, ok
}

// claim: the entry, and true when it is fresh enough or being read (nothing to do); else the
// caller reads it.
func (c *policyCache) claim(rl *ratelimit.Client, name string) (policyQuota, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := policyKey{rl, name}
	p := c.m[k]
	if c.reading[k] || (!p.readAt.IsZero() && time.Since(p.readAt) < policyCacheFor) {
		return p, true
	}
	c.reading[k] = true
	return p, false
}

func (c *policyCache) set(rl *ratelimit.Client, name string, p policyQuota) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := policyKey{rl, name}
	c.m[k] = p
	delete(c.reading, k)
}

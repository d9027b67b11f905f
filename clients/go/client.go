package ratelimit

// The typed client: every command of the module as a method that sends exactly one command
// (one round trip), routed by its key on a cluster or ring.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Client sends the module's commands over a go-redis v9 client.
type Client struct {
	rdb    redis.UniversalClient
	t      transport
	prefix string
	// noDeadline: the server's module predates DEADLINE (learnt from its first refusal of it).
	noDeadline atomic.Bool
}

// ClientOption configures a [Client].
type ClientOption func(*Client)

// WithPrefix prepends prefix to every key the client sends.
func WithPrefix(prefix string) ClientOption { return func(c *Client) { c.prefix = prefix } }

// New returns a client over rdb (a *redis.Client, *redis.ClusterClient, *redis.Ring, or a
// failover client). rdb stays the caller's: New never closes it.
func New(rdb redis.UniversalClient, opts ...ClientOption) *Client {
	c := &Client{rdb: rdb, t: newTransport(rdb)}
	for _, o := range opts {
		o(c)
	}
	return c
}

// NewWithDoer returns a client whose commands go through d, e.g. go-zero's own
// *redis.Redis (its breaker, logging and metrics apply; its retries are its own). Such a
// client has no [Client.Redis]: the calls that address every primary ([Client.EachPrimary]:
// policies, RL.TOP) fail.
func NewWithDoer(d Doer, opts ...ClientOption) *Client {
	c := &Client{t: transport{doer: d}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Redis is the go-redis client the Client sends through (nil for [NewWithDoer]'s).
func (c *Client) Redis() redis.UniversalClient { return c.rdb }

// Prefix is the prefix prepended to every key.
func (c *Client) Prefix() string { return c.prefix }

func (c *Client) key(key string) (string, error) {
	if key == "" {
		return "", errors.New("ratelimit: key must not be empty")
	}
	return c.prefix + key, nil
}

// Do sends one command whose key is argument keyPos (0: none), and returns its reply with
// server errors translated ([ServerError]); a nil reply is (nil, nil). The command is sent
// once (go-redis does not retry it) and the call returns when ctx ends, whatever the go-redis
// client's ContextTimeoutEnabled.
func (c *Client) Do(ctx context.Context, keyPos int, args ...any) (any, error) {
	return c.do(ctx, keyPos, 0, args)
}

// do is Do of a command carrying WAIT wait (0: none; -1: without limit).
func (c *Client) do(ctx context.Context, keyPos int, wait time.Duration, args []any) (any, error) {
	reply, err := c.t.process(ctx, args, keyPos, wait)
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		name, _ := args[0].(string)
		return nil, translate(name, err)
	}
	return reply, nil
}

// decide sends a limiting command that may carry DEADLINE (the last two arguments when
// deadline is true): when the server's module predates it, the command goes again without
// it, and later calls send none.
func (c *Client) decide(ctx context.Context, keyPos int, args []any, deadline bool, wait time.Duration) (Decision, error) {
	reply, err := c.do(ctx, keyPos, wait, args)
	if err != nil && deadline && isUnknownDeadline(err) {
		c.noDeadline.Store(true)
		reply, err = c.do(ctx, keyPos, wait, args[:len(args)-2])
	}
	if err != nil {
		return Decision{}, err
	}
	return decisionOf(reply)
}

// deadlines: whether the call carries DEADLINE (it has one, and the module knows it).
func (c *Client) deadlines(ctx context.Context, o *callOptions) bool {
	if c.noDeadline.Load() {
		return false
	}
	_, ok := o.deadlineOf(ctx)
	return ok
}

// Limit judges one request on key under limit (RL.TOKEN, RL.PERIOD, RL.SLIDE or RL.LEAKY)
// with the options given (Cost, AtMost, Ban, Wait, DryRun, At, Fresh).
func (c *Client) Limit(ctx context.Context, key string, limit Limit, opts ...Option) (Decision, error) {
	if limit == nil {
		return Decision{}, errors.New("ratelimit: Limit needs a limit (Token, Period, Slide or Leaky)")
	}
	k, err := c.key(key)
	if err != nil {
		return Decision{}, err
	}
	o := gather(opts)
	args := make([]any, 0, 16)
	args = append(args, limit.Command(), k)
	if args, err = limit.appendArgs(args); err != nil {
		return Decision{}, err
	}
	if args, err = o.costArgs(args); err != nil {
		return Decision{}, err
	}
	deadline := c.deadlines(ctx, &o)
	if args, err = o.callArgs(ctx, args, what{ban: true, wait: true, fresh: true}, deadline); err != nil {
		return Decision{}, err
	}
	d, err := c.decide(ctx, 1, args, deadline, o.sentWait)
	if err == nil && !o.atMost && d.Allowed {
		d.Taken = o.cost
	}
	return d, err
}

// Throttle is redis-cell's CL.THROTTLE: GCRA of perPeriod requests per period (whole seconds,
// redis-cell's count) with burst tolerance maxBurst, taking quantity. Times in the reply are whole seconds.
func (c *Client) Throttle(ctx context.Context, key string, maxBurst, perPeriod int64, period time.Duration, quantity int64, opts ...Option) (Decision, error) {
	k, err := c.key(key)
	if err != nil {
		return Decision{}, err
	}
	if period < time.Second || period%time.Second != 0 {
		return Decision{}, fmt.Errorf("ratelimit: the period of CL.THROTTLE is whole seconds (got %v)", period)
	}
	b, err := count("maxBurst", maxBurst, 0)
	if err != nil {
		return Decision{}, err
	}
	n, err := count("count", perPeriod, 1)
	if err != nil {
		return Decision{}, err
	}
	q, err := count("quantity", quantity, 0)
	if err != nil {
		return Decision{}, err
	}
	o := gather(opts)
	args := []any{"CL.THROTTLE", k, b, n, strconv.FormatInt(int64(period/time.Second), 10), q}
	if args, err = o.callArgs(ctx, args, what{}, false); err != nil {
		return Decision{}, err
	}
	reply, err := c.Do(ctx, 1, args...)
	if err != nil {
		return Decision{}, err
	}
	r, err := decisionOf(reply)
	if err != nil {
		return Decision{}, err
	}
	// redis-cell's layout: limited first, times in seconds, -1 retry when allowed.
	allowed := !r.Allowed
	d := Decision{Allowed: allowed, Limit: r.Limit, Remaining: r.Remaining, ResetAfter: r.ResetAfter / time.Millisecond * time.Second}
	switch {
	case allowed:
		d.Taken = quantity
	case r.RetryAfter < 0:
		d.RetryAfter = Never
	default:
		d.RetryAfter = r.RetryAfter / time.Millisecond * time.Second
	}
	return d, nil
}

// Group is one limit of an [Client.All] call: a key and its limit, or a server policy's limit
// (Policy set, Limit nil). Cost is the permits it takes (0 means the default 1; ZeroCost for
// a cost of 0).
type Group struct {
	Key      string
	Limit    Limit
	Policy   string
	Cost     int64
	ZeroCost bool
}

// AllDecision is RL.ALL's answer: the binding limit's decision, its Index into the groups,
// and every group's own standing (Details, what each single command would answer now).
type AllDecision struct {
	Decision
	Index   int
	Details []Decision
}

// All judges several limits at once, all or nothing (RL.ALL): admitted only when every limit
// admits, and then every key counts. On a cluster every key must hash to one slot (a hash
// tag: "{user42}:s", "{user42}:d"). Options: DryRun, At.
func (c *Client) All(ctx context.Context, groups []Group, opts ...Option) (AllDecision, error) {
	if len(groups) == 0 {
		return AllDecision{}, errors.New("ratelimit: All needs at least one group")
	}
	args := make([]any, 0, 2+len(groups)*8)
	args = append(args, "RL.ALL", strconv.Itoa(len(groups)))
	for _, g := range groups {
		k, err := c.key(g.Key)
		if err != nil {
			return AllDecision{}, err
		}
		args = append(args, k)
	}
	for _, g := range groups {
		var err error
		switch {
		case g.Limit != nil:
			args = append(args, g.Limit.keyword())
			if args, err = g.Limit.appendArgs(args); err != nil {
				return AllDecision{}, err
			}
		case g.Policy != "":
			args = append(args, "POLICY", g.Policy)
		default:
			return AllDecision{}, errors.New("ratelimit: each group needs a Limit or a Policy")
		}
		cost := g.Cost
		if g.ZeroCost {
			cost = 0
		} else if cost == 0 {
			cost = 1
		}
		if cost != 1 {
			n, err := count("Cost", cost, 0)
			if err != nil {
				return AllDecision{}, err
			}
			args = append(args, "COST", n)
		}
	}
	o := gather(opts)
	deadline := c.deadlines(ctx, &o)
	args, err := o.callArgs(ctx, args, what{}, deadline)
	if err != nil {
		return AllDecision{}, err
	}
	reply, err := c.Do(ctx, 2, args...)
	if err != nil && deadline && isUnknownDeadline(err) {
		c.noDeadline.Store(true)
		reply, err = c.Do(ctx, 2, args[:len(args)-2]...)
	}
	if err != nil {
		return AllDecision{}, err
	}
	v, ok := reply.([]any)
	if !ok || len(v) != 7 {
		return AllDecision{}, fmt.Errorf("ratelimit: unexpected RL.ALL reply %v", reply)
	}
	head, err := decisionOf(v[:5])
	if err != nil {
		return AllDecision{}, err
	}
	index, _ := v[5].(int64)
	rows, _ := v[6].([]any)
	out := AllDecision{Decision: head, Index: int(index) - 1, Details: make([]Decision, 0, len(rows))}
	for _, row := range rows {
		d, err := decisionOf(row)
		if err != nil {
			return AllDecision{}, err
		}
		out.Details = append(out.Details, d)
	}
	return out, nil
}

// Refund gives count permits back (RL.REFUND): the standing after it, or ok false when there
// was nothing to refund.
func (c *Client) Refund(ctx context.Context, key string, n int64, opts ...Option) (Decision, bool, error) {
	return c.settle(ctx, "RL.REFUND", key, n, opts)
}

// Charge takes count permits whatever the limit, as a debt later requests wait out
// (RL.CHARGE): the standing after it, or ok false when there is nothing live to charge.
func (c *Client) Charge(ctx context.Context, key string, n int64, opts ...Option) (Decision, bool, error) {
	return c.settle(ctx, "RL.CHARGE", key, n, opts)
}

func (c *Client) settle(ctx context.Context, command, key string, n int64, opts []Option) (Decision, bool, error) {
	k, err := c.key(key)
	if err != nil {
		return Decision{}, false, err
	}
	cnt, err := count("count", n, 1)
	if err != nil {
		return Decision{}, false, err
	}
	o := gather(opts)
	args, err := o.callArgs(ctx, []any{command, k, cnt}, what{}, false)
	if err != nil {
		return Decision{}, false, err
	}
	return c.optionalDecision(ctx, args)
}

func (c *Client) optionalDecision(ctx context.Context, args []any) (Decision, bool, error) {
	reply, err := c.Do(ctx, 1, args...)
	if err != nil || reply == nil {
		return Decision{}, false, err
	}
	d, err := decisionOf(reply)
	return d, err == nil, err
}

// Peek is the standing now, what a DRYRUN COST 1 would get (RL.PEEK, read-only), or ok
// false when the key holds no limiter.
func (c *Client) Peek(ctx context.Context, key string) (Decision, bool, error) {
	k, err := c.key(key)
	if err != nil {
		return Decision{}, false, err
	}
	return c.optionalDecision(ctx, []any{"RL.PEEK", k})
}

// Info is the stored parameters and state (RL.INFO, read-only) by the server's field names,
// integers as int64, or nil when the key holds no limiter.
func (c *Client) Info(ctx context.Context, key string) (map[string]any, error) {
	k, err := c.key(key)
	if err != nil {
		return nil, err
	}
	reply, err := c.Do(ctx, 1, "RL.INFO", k)
	if err != nil || reply == nil {
		return nil, err
	}
	return fields(reply), nil
}

// fields reads field/value pairs: a flat array (RESP2) or a map (RESP3).
func fields(reply any) map[string]any {
	out := map[string]any{}
	put := func(k, v any) {
		name := fmt.Sprint(k)
		if s, ok := v.(string); ok {
			if n, err := strconv.ParseInt(s, 10, 64); err == nil {
				out[name] = n
				return
			}
		}
		out[name] = v
	}
	switch r := reply.(type) {
	case []any:
		for i := 0; i+1 < len(r); i += 2 {
			put(r[i], r[i+1])
		}
	case map[any]any:
		for k, v := range r {
			put(k, v)
		}
	case map[string]any:
		for k, v := range r {
			put(k, v)
		}
	}
	return out
}

// Lease is RL.ACQUIRE's answer: the decision and the lease's ID ("" when refused or dry).
type Lease struct {
	Decision
	ID string
}

// Acquire takes a lease: at most limit held at once, each lapsing by itself after lease
// (RL.ACQUIRE). Options: LeaseID, Wait, DryRun, At.
func (c *Client) Acquire(ctx context.Context, key string, limit int64, lease time.Duration, opts ...Option) (Lease, error) {
	k, err := c.key(key)
	if err != nil {
		return Lease{}, err
	}
	l, err := count("limit", limit, 1)
	if err != nil {
		return Lease{}, err
	}
	ms, err := durationMs("lease", lease)
	if err != nil {
		return Lease{}, err
	}
	o := gather(opts)
	args := []any{"RL.ACQUIRE", k, l, ms}
	if o.id != "" {
		args = append(args, "ID", o.id)
	}
	if args, err = o.callArgs(ctx, args, what{wait: true}, false); err != nil {
		return Lease{}, err
	}
	reply, err := c.do(ctx, 1, o.sentWait, args)
	if err != nil {
		return Lease{}, err
	}
	v, ok := reply.([]any)
	if !ok || len(v) != 6 {
		return Lease{}, fmt.Errorf("ratelimit: unexpected RL.ACQUIRE reply %v", reply)
	}
	d, err := decisionOf(v[:5])
	if err != nil {
		return Lease{}, err
	}
	id, _ := v[5].(string)
	return Lease{Decision: d, ID: id}, nil
}

// Release gives a lease back (RL.RELEASE): true when it was held.
func (c *Client) Release(ctx context.Context, key, id string) (bool, error) {
	k, err := c.key(key)
	if err != nil {
		return false, err
	}
	reply, err := c.Do(ctx, 1, "RL.RELEASE", k, id)
	if err != nil {
		return false, err
	}
	n, _ := reply.(int64)
	return n == 1, nil
}

// Hit judges key under the server's policy named policy (RL.HIT): the same decision as the
// direct command with the policy's parameters. Options: Cost, Wait, DryRun, At.
func (c *Client) Hit(ctx context.Context, policy, key string, opts ...Option) (Decision, error) {
	if policy == "" {
		return Decision{}, errors.New("ratelimit: policy name must not be empty")
	}
	k, err := c.key(key)
	if err != nil {
		return Decision{}, err
	}
	o := gather(opts)
	if o.atMost {
		return Decision{}, errors.New("ratelimit: AtMost is not an option of RL.HIT")
	}
	args := make([]any, 0, 12)
	args = append(args, "RL.HIT", policy, k)
	if args, err = o.costArgs(args); err != nil {
		return Decision{}, err
	}
	deadline := c.deadlines(ctx, &o)
	if args, err = o.callArgs(ctx, args, what{wait: true}, deadline); err != nil {
		return Decision{}, err
	}
	d, err := c.decide(ctx, 2, args, deadline, o.sentWait)
	if err == nil && d.Allowed {
		d.Taken = o.cost
	}
	return d, err
}

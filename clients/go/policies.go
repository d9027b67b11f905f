package ratelimit

// Server policies (RL.POLICY) and who is refused now (RL.TOP): node state, so on a cluster or
// ring every primary is asked (or written), each in one round trip.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// PolicyOption sets an option of [Client.SetPolicy].
type PolicyOption func(*policyOptions)

type policyOptions struct {
	ban    time.Duration
	clear  bool
	shadow bool
	forKey string
}

// PolicyBan locks a refused key out for d (BAN d; with clear, BAN d CLEAR).
func PolicyBan(d time.Duration, clear bool) PolicyOption {
	return func(o *policyOptions) { o.ban, o.clear = d, clear }
}

// PolicyShadow makes the policy answer would-be refusals admitted and counts them (SHADOW).
func PolicyShadow() PolicyOption { return func(o *policyOptions) { o.shadow = true } }

// PolicyFor makes the definition key's override of the policy (FOR key).
func PolicyFor(key string) PolicyOption { return func(o *policyOptions) { o.forKey = key } }

// EachPrimary runs fn once per primary node: every master of a cluster, every shard of a
// ring, else the one client. The calls run concurrently; the first error is returned.
func (c *Client) EachPrimary(ctx context.Context, fn func(ctx context.Context, node redis.UniversalClient) error) error {
	var mu sync.Mutex
	var first error
	record := func(err error) error {
		if err != nil {
			mu.Lock()
			if first == nil {
				first = err
			}
			mu.Unlock()
		}
		return nil
	}
	switch r := c.rdb.(type) {
	case nil:
		return errors.New("ratelimit: a client over a Doer (NewWithDoer) cannot address every primary; use a go-redis client")
	case *redis.ClusterClient:
		err := r.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error { return record(fn(ctx, node)) })
		if err != nil {
			return err
		}
	case *redis.Ring:
		err := r.ForEachShard(ctx, func(ctx context.Context, node *redis.Client) error { return record(fn(ctx, node)) })
		if err != nil {
			return err
		}
	default:
		_ = record(fn(ctx, c.rdb))
	}
	return first
}

// onPrimaries sends one command to every primary and returns the replies (nil replies kept).
func (c *Client) onPrimaries(ctx context.Context, args ...any) ([]any, error) {
	var mu sync.Mutex
	var replies []any
	err := c.EachPrimary(ctx, func(ctx context.Context, node redis.UniversalClient) error {
		cmd := redis.NewCmd(ctx, args...)
		err := node.Process(ctx, cmd)
		if errors.Is(err, redis.Nil) {
			err = nil
		}
		if err != nil {
			name, _ := args[0].(string)
			if len(args) > 1 {
				name += " " + fmt.Sprint(args[1])
			}
			return translate(name, err)
		}
		mu.Lock()
		replies = append(replies, cmd.Val())
		mu.Unlock()
		return nil
	})
	return replies, err
}

// SetPolicy defines (replaces, whole) the policy name, on every primary (RL.POLICY SET).
func (c *Client) SetPolicy(ctx context.Context, name string, limit Limit, opts ...PolicyOption) error {
	if name == "" || limit == nil {
		return errors.New("ratelimit: SetPolicy needs a name and a limit")
	}
	var o policyOptions
	for _, opt := range opts {
		opt(&o)
	}
	args := []any{"RL.POLICY", "SET", name, limit.keyword()}
	args, err := limit.appendArgs(args)
	if err != nil {
		return err
	}
	if o.ban != 0 {
		d, err := durationMs("ban", o.ban)
		if err != nil {
			return err
		}
		args = append(args, "BAN", d)
		if o.clear {
			args = append(args, "CLEAR")
		}
	}
	if o.shadow {
		args = append(args, "SHADOW")
	}
	if o.forKey != "" {
		args = append(args, "FOR", c.prefix+o.forKey)
	}
	_, err = c.onPrimaries(ctx, args...)
	return err
}

// GetPolicy is the policy's definition (or forKey's override when not ""), by RL.POLICY GET's
// field names, or nil when there is none.
func (c *Client) GetPolicy(ctx context.Context, name, forKey string) (map[string]any, error) {
	args := []any{"RL.POLICY", "GET", name}
	if forKey != "" {
		args = append(args, "FOR", c.prefix+forKey)
	}
	replies, err := c.onPrimaries(ctx, args...)
	if err != nil {
		return nil, err
	}
	for _, r := range replies {
		if r != nil {
			return fields(r), nil
		}
	}
	return nil, nil
}

// DeletePolicy deletes the policy with its overrides, or only forKey's override, on every
// primary: true when it existed on any.
func (c *Client) DeletePolicy(ctx context.Context, name, forKey string) (bool, error) {
	args := []any{"RL.POLICY", "DEL", name}
	if forKey != "" {
		args = append(args, "FOR", c.prefix+forKey)
	}
	replies, err := c.onPrimaries(ctx, args...)
	existed := false
	for _, r := range replies {
		if n, _ := r.(int64); n == 1 {
			existed = true
		}
	}
	return existed, err
}

// PolicyNames lists the policies of every primary, each once, sorted.
func (c *Client) PolicyNames(ctx context.Context) ([]string, error) {
	replies, err := c.onPrimaries(ctx, "RL.POLICY", "LIST")
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var names []string
	for _, r := range replies {
		list, _ := r.([]any)
		for _, n := range list {
			s := fmt.Sprint(n)
			if !seen[s] {
				seen[s] = true
				names = append(names, s)
			}
		}
	}
	sort.Strings(names)
	return names, nil
}

// PolicyStats is the policy's counters (calls, admitted, limited, shadow_limited,
// near_limit), summed over the primaries.
func (c *Client) PolicyStats(ctx context.Context, name string) (map[string]int64, error) {
	replies, err := c.onPrimaries(ctx, "RL.POLICY", "STATS", name)
	if err != nil {
		return nil, err
	}
	sum := map[string]int64{}
	for _, r := range replies {
		for k, v := range fields(r) {
			if n, ok := v.(int64); ok {
				sum[k] += n
			}
		}
	}
	return sum, nil
}

// ResetPolicyStats zeroes every policy's counters on every primary (RL.POLICY RESETSTAT).
func (c *Client) ResetPolicyStats(ctx context.Context) error {
	_, err := c.onPrimaries(ctx, "RL.POLICY", "RESETSTAT")
	return err
}

// TopKey is one row of [Client.Top]: a key, how often it was refused lately, and when last.
type TopKey struct {
	Key         string
	Refused     int64
	LastRefused time.Time
}

// Top is the keys refused most often now (RL.TOP COUNT n [POLICY policy]), over every
// primary (counts of a key on several nodes added), most refused first.
func (c *Client) Top(ctx context.Context, n int, policy string) ([]TopKey, error) {
	if n < 1 || n > 20000 {
		return nil, fmt.Errorf("ratelimit: Top's count must be 1 … 20000 (got %d)", n)
	}
	args := []any{"RL.TOP", "COUNT", strconv.Itoa(n)}
	if policy != "" {
		args = append(args, "POLICY", policy)
	}
	replies, err := c.onPrimaries(ctx, args...)
	if err != nil {
		return nil, err
	}
	byKey := map[string]*TopKey{}
	for _, r := range replies {
		rows, _ := r.([]any)
		for _, row := range rows {
			v, _ := row.([]any)
			if len(v) != 3 {
				continue
			}
			key := fmt.Sprint(v[0])
			refused, _ := v[1].(int64)
			last, _ := v[2].(int64)
			t := byKey[key]
			if t == nil {
				t = &TopKey{Key: key}
				byKey[key] = t
			}
			t.Refused += refused
			if at := time.UnixMilli(last); at.After(t.LastRefused) {
				t.LastRefused = at
			}
		}
	}
	out := make([]TopKey, 0, len(byKey))
	for _, t := range byKey {
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Refused != out[j].Refused {
			return out[i].Refused > out[j].Refused
		}
		return out[i].LastRefused.After(out[j].LastRefused)
	})
	if len(out) > n {
		out = out[:n]
	}
	return out, nil
}

// ResetTop forgets what RL.TOP has counted, on every primary (RL.TOP RESET).
func (c *Client) ResetTop(ctx context.Context) error {
	_, err := c.onPrimaries(ctx, "RL.TOP", "RESET")
	return err
}

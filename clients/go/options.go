package ratelimit

// A call's options: what it costs and how it is judged (COST/ATMOST, BAN, WAIT, DRYRUN, AT,
// FRESH) and the deadline its context carries.

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// Option sets one option of a limiting call: [Cost], [AtMost], [Ban], [BanClear], [Wait],
// [DryRun], [At], [Fresh], [Deadline], [LeaseID]. A nil Option is ignored.
type Option interface {
	apply(o *callOptions)
}

// optionFunc is an [Option] that is a function.
type optionFunc func(*callOptions)

func (f optionFunc) apply(o *callOptions) { f(o) }

type callOptions struct {
	cost    int64
	atMost  bool
	ban     time.Duration
	clear   bool
	wait    time.Duration
	waiting bool
	dryRun  bool
	at      time.Time
	fresh   bool
	id      string
	// deadline: an explicit DEADLINE (else the context's)
	deadline time.Time
	// sentWait: the WAIT callArgs sent (0: none, -1: without limit)
	sentWait time.Duration
}

// Cost is the permits the call takes (default 1; 0 is a peek that takes nothing).
func Cost(n int64) Option { return optionFunc(func(o *callOptions) { o.cost, o.atMost = n, false }) }

// AtMost takes what is left, up to n permits, atomically (the module's ATMOST n):
// Decision.Taken says how many were taken; admitted when at least one permit was left.
func AtMost(n int64) Option { return optionFunc(func(o *callOptions) { o.cost, o.atMost = n, true }) }

// Ban locks the key out for d once the algorithm refuses a request (BAN d).
func Ban(d time.Duration) Option { return optionFunc(func(o *callOptions) { o.ban = d }) }

// BanClear is [Ban] whose start also clears the limiter (BAN d CLEAR): fresh when it ends.
func BanClear(d time.Duration) Option {
	return optionFunc(func(o *callOptions) { o.ban, o.clear = d, true })
}

// Wait waits on the server until the request is admitted, in arrival order, at most d (0:
// without limit). The wait is also bounded by the context's deadline.
func Wait(d time.Duration) Option {
	return optionFunc(func(o *callOptions) { o.wait, o.waiting = d, true })
}

// DryRun answers as the call would and changes nothing.
func DryRun() Option { return optionFunc(func(o *callOptions) { o.dryRun = true }) }

// At judges the call at t instead of the server's clock (tests, replays).
func At(t time.Time) Option { return optionFunc(func(o *callOptions) { o.at = t }) }

// Fresh judges the call against a fresh limiter; admitted, it replaces what the key holds.
func Fresh() Option { return optionFunc(func(o *callOptions) { o.fresh = true }) }

// Deadline sends DEADLINE t instead of the context's deadline: the server counts nothing when
// its clock is past t as it judges the call ([ErrDeadline]).
func Deadline(t time.Time) Option { return optionFunc(func(o *callOptions) { o.deadline = t }) }

// LeaseID names the lease [Client.Acquire] takes (else the server assigns one).
func LeaseID(id string) Option { return optionFunc(func(o *callOptions) { o.id = id }) }

func gather(opts []Option) callOptions {
	o := callOptions{cost: 1}
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	return o
}

// costArgs appends COST n (only when not the default 1) or ATMOST n.
func (o *callOptions) costArgs(args []any) ([]any, error) {
	if o.atMost {
		n, err := count("AtMost", o.cost, 0)
		if err != nil {
			return nil, err
		}
		return append(args, "ATMOST", n), nil
	}
	if o.cost == 1 {
		return args, nil
	}
	n, err := count("Cost", o.cost, 0)
	if err != nil {
		return nil, err
	}
	return append(args, "COST", n), nil
}

// what says which of the options a command takes.
type what struct{ ban, wait, fresh bool }

// callArgs appends BAN [CLEAR], WAIT, DRYRUN, AT, FRESH (those the command takes; others given
// are an error) and DEADLINE from the context.
func (o *callOptions) callArgs(ctx context.Context, args []any, w what, deadline bool) ([]any, error) {
	if o.ban != 0 {
		if !w.ban {
			return nil, fmt.Errorf("ratelimit: Ban is not an option of this call")
		}
		d, err := durationMs("Ban", o.ban)
		if err != nil {
			return nil, err
		}
		args = append(args, "BAN", d)
		if o.clear {
			args = append(args, "CLEAR")
		}
	}
	if o.waiting {
		if !w.wait {
			return nil, fmt.Errorf("ratelimit: Wait is not an option of this call")
		}
		wait := o.wait
		if dl, ok := ctx.Deadline(); ok {
			left := time.Until(dl)
			if left < time.Millisecond {
				left = time.Millisecond
			}
			if wait == 0 || left < wait {
				wait = left
			}
		}
		t, err := timeoutMs("Wait", wait)
		if err != nil {
			return nil, err
		}
		args = append(args, "WAIT", t)
		o.sentWait = wait
		if wait == 0 {
			o.sentWait = -1
		}
	}
	if o.dryRun {
		args = append(args, "DRYRUN")
	}
	if !o.at.IsZero() {
		args = append(args, "AT", strconv.FormatInt(o.at.UnixMilli(), 10))
	}
	if o.fresh {
		if !w.fresh {
			return nil, fmt.Errorf("ratelimit: Fresh is not an option of this call")
		}
		args = append(args, "FRESH")
	}
	if deadline {
		if dl, ok := o.deadlineOf(ctx); ok {
			args = append(args, "DEADLINE", strconv.FormatInt(dl.UnixMilli(), 10))
		}
	}
	return args, nil
}

// deadlineOf is the call's deadline: the explicit one, else the context's.
func (o *callOptions) deadlineOf(ctx context.Context) (time.Time, bool) {
	if !o.deadline.IsZero() {
		return o.deadline, true
	}
	return ctx.Deadline()
}

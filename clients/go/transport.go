package ratelimit

// How a module command reaches the server: once (never retried by go-redis: a limiting call
// that may have counted is not sent again), within the caller's context whatever the go-redis
// client's options, and with a read timeout that covers a WAIT.
//
// Terms:
//   - the view: for a *redis.Client (single node or sentinel failover), a clone of it made by
//     go-redis' own WithTimeout — the same connection pool and hooks — whose options say no
//     retries, contexts honoured, and no read timeout of its own: each call's context carries
//     the read timeout instead (the caller's ReadTimeout, plus the WAIT for a waiting call);
//   - the cap: on a cluster or ring (no such view), a WAIT is shortened to end before the
//     client's ReadTimeout, so go-redis never times the call out and sends it again.

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Doer sends one command and answers its reply, as go-zero's (*redis.Redis).DoCtx does (a nil
// reply as redis.Nil, a server error as a redis.Error).
type Doer interface {
	DoCtx(ctx context.Context, args ...any) (any, error)
}

// transport sends the module's commands (see the file's comment).
type transport struct {
	rdb redis.UniversalClient
	// doer: the commands go through it instead of rdb (NewWithDoer).
	doer Doer
	// view: rdb's retry-free, context-honouring clone (nil when rdb is not a *redis.Client).
	view *redis.Client
	// readTimeout: rdb's read timeout (0: none).
	readTimeout time.Duration
	// honoursContext: rdb itself gives up when the context ends (ContextTimeoutEnabled).
	honoursContext bool
}

// waitMargin is how long before a cluster's or ring's read timeout a capped WAIT ends.
const waitMargin = 500 * time.Millisecond

func newTransport(rdb redis.UniversalClient) transport {
	t := transport{rdb: rdb}
	switch r := rdb.(type) {
	case *redis.Client:
		opt := r.Options()
		t.readTimeout = positive(opt.ReadTimeout)
		t.view = r.WithTimeout(opt.WriteTimeout)
		// The view's options are its own copy (WithTimeout clones them): no retries, the
		// context's deadline is the read deadline.
		vo := t.view.Options()
		vo.MaxRetries = 0
		vo.ContextTimeoutEnabled = true
		vo.ReadTimeout = 0
		t.honoursContext = true
	case *redis.ClusterClient:
		t.readTimeout = positive(r.Options().ReadTimeout)
		t.honoursContext = r.Options().ContextTimeoutEnabled
	case *redis.Ring:
		t.readTimeout = positive(r.Options().ReadTimeout)
		t.honoursContext = r.Options().ContextTimeoutEnabled
	}
	return t
}

func positive(d time.Duration) time.Duration {
	if d < 0 {
		return 0
	}
	return d
}

// maxWait is the longest WAIT a call may send (0: any).
func (t *transport) maxWait() time.Duration {
	if t.view != nil || t.readTimeout == 0 {
		return 0
	}
	if t.readTimeout <= 2*waitMargin {
		return t.readTimeout / 2
	}
	return t.readTimeout - waitMargin
}

// send sends args through the Doer, returning when ctx ends (retries are the Doer's own).
func (t *transport) send(ctx context.Context, args []any) (any, error) {
	if ctx.Done() == nil {
		return t.doer.DoCtx(ctx, args...)
	}
	type answer struct {
		reply any
		err   error
	}
	done := make(chan answer, 1)
	go func() {
		reply, err := t.doer.DoCtx(ctx, args...)
		done <- answer{reply, err}
	}()
	select {
	case a := <-done:
		return a.reply, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// process sends cmd once; wait is the WAIT it carries (0: none, -1: without limit).
func (t *transport) process(ctx context.Context, cmd redis.Cmder, wait time.Duration) error {
	if t.view != nil {
		callCtx := ctx
		if t.readTimeout > 0 && wait >= 0 {
			var cancel context.CancelFunc
			callCtx, cancel = context.WithTimeout(ctx, t.readTimeout+wait)
			defer cancel()
		}
		err := t.view.Process(callCtx, cmd)
		if err != nil {
			if cause := ended(ctx); cause != nil {
				// The socket's deadline was the caller's: say so (errors.Is(err,
				// context.DeadlineExceeded)).
				return fmt.Errorf("%w (%w)", cause, err)
			}
		}
		return err
	}
	if t.honoursContext || ctx.Done() == nil {
		return t.rdb.Process(ctx, cmd)
	}
	// go-redis would wait for its read timeout: answer when the context ends (the reply, if
	// any, is read and dropped by the goroutine).
	done := make(chan error, 1)
	go func() { done <- t.rdb.Process(ctx, cmd) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ended is why ctx ended (nil: it has not), counting a deadline reached whose timer has not
// fired yet (the socket's deadline, set to the same instant, can fire first).
func ended(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

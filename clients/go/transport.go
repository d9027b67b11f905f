package ratelimit

// How a module command reaches the server: once (never retried by go-redis: a limiting call
// that may have counted is not sent again), within the caller's context whatever the go-redis
// client's options, and with a read timeout that covers a WAIT.
//
// Terms:
//   - a view: a clone of a *redis.Client made by go-redis' own WithTimeout — the same
//     connection pool and hooks — whose options say no retries, contexts honoured, and no read
//     timeout of its own: each call's context carries the read timeout instead (the client's
//     ReadTimeout, plus the WAIT for a waiting call);
//   - routing: on a cluster or ring, a keyed command goes through a view of the node its key
//     lives on (the cluster's primary for the slot, the ring's shard); a MOVED, ASK or TRYAGAIN
//     reply (the command did not run) sends it again through the cluster client, which follows
//     the redirection with its own options (its ReadTimeout, its retries);
//   - a client of another type (a wrapper of go-redis') gets the commands through its Process,
//     within the caller's context; its own options apply.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
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
	// single: the view of rdb when it is a *redis.Client.
	single *view
	// route: the node client a key lives on (cluster, ring); nil otherwise.
	route func(ctx context.Context, key string) (*redis.Client, error)
	// views: the views of route's node clients, by node client.
	views *sync.Map
	// honoursContext: rdb itself gives up when the context ends (ContextTimeoutEnabled).
	honoursContext bool
}

// view is a retry-free, context-honouring clone of a node client (see the file's comment).
type view struct {
	client      *redis.Client
	readTimeout time.Duration // the node client's (0: none)
}

func newView(c *redis.Client) *view {
	opt := c.Options()
	v := &view{client: c.WithTimeout(opt.WriteTimeout), readTimeout: positive(opt.ReadTimeout)}
	// The view's options are its own copy (WithTimeout clones them).
	vo := v.client.Options()
	vo.MaxRetries = 0
	vo.ContextTimeoutEnabled = true
	vo.ReadTimeout = 0
	return v
}

// maxViews bounds the views kept (node clients replaced by topology changes leave theirs).
const maxViews = 1024

func newTransport(rdb redis.UniversalClient) transport {
	t := transport{rdb: rdb}
	switch r := rdb.(type) {
	case *redis.Client:
		t.single = newView(r)
		t.honoursContext = true
	case *redis.ClusterClient:
		t.honoursContext = r.Options().ContextTimeoutEnabled
		t.route = r.MasterForKey
		t.views = &sync.Map{}
	case *redis.Ring:
		t.honoursContext = r.Options().ContextTimeoutEnabled
		t.route = func(_ context.Context, key string) (*redis.Client, error) { return r.GetShardClientForKey(key) }
		t.views = &sync.Map{}
	}
	return t
}

func positive(d time.Duration) time.Duration {
	if d < 0 {
		return 0
	}
	return d
}

// viewOf is the view of node client c.
func (t *transport) viewOf(c *redis.Client) *view {
	if v, ok := t.views.Load(c); ok {
		return v.(*view)
	}
	n := 0
	t.views.Range(func(_, _ any) bool { n++; return n < maxViews })
	if n >= maxViews {
		t.views.Range(func(k, _ any) bool { t.views.Delete(k); return true })
	}
	v, _ := t.views.LoadOrStore(c, newView(c))
	return v.(*view)
}

// process sends args once and answers the reply; keyPos is the argument that is the
// command's key (0: none), wait the WAIT it carries (0: none, -1: without limit).
func (t *transport) process(ctx context.Context, args []any, keyPos int, wait time.Duration) (any, error) {
	if t.doer != nil {
		return t.send(ctx, args)
	}
	newCmd := func() *redis.Cmd {
		cmd := redis.NewCmd(ctx, args...)
		if keyPos > 0 {
			cmd.SetFirstKeyPos(int8(keyPos))
		}
		return cmd
	}
	if t.single != nil {
		return t.single.process(ctx, newCmd(), wait)
	}
	if t.route != nil && keyPos > 0 && keyPos < len(args) {
		if key, ok := args[keyPos].(string); ok {
			node, err := t.route(ctx, key)
			if err != nil {
				return nil, err
			}
			reply, err := t.viewOf(node).process(ctx, newCmd(), wait)
			if !redirected(err) {
				return reply, err
			}
			// The command did not run on that node: the cluster client follows the
			// redirection (and may retry there).
		}
	}
	cmd := newCmd()
	if t.honoursContext || ctx.Done() == nil {
		err := t.rdb.Process(ctx, cmd)
		return cmd.Val(), err
	}
	// go-redis would wait for its read timeout: answer when the context ends (the reply, if
	// any, is read and dropped by the goroutine).
	done := make(chan error, 1)
	go func() { done <- t.rdb.Process(ctx, cmd) }()
	select {
	case err := <-done:
		return cmd.Val(), err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// redirected: a cluster's answer that the command did not run on the node it reached.
func redirected(err error) bool {
	var rerr redis.Error
	if err == nil || !errors.As(err, &rerr) {
		return false
	}
	msg := rerr.Error()
	return strings.HasPrefix(msg, "MOVED ") || strings.HasPrefix(msg, "ASK ") || strings.HasPrefix(msg, "TRYAGAIN")
}

// process sends cmd through the view, with the read timeout (plus wait) as the context's
// deadline when the context has none sooner.
func (v *view) process(ctx context.Context, cmd *redis.Cmd, wait time.Duration) (any, error) {
	callCtx := ctx
	if v.readTimeout > 0 && wait >= 0 {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeout(ctx, v.readTimeout+wait)
		defer cancel()
	}
	err := v.client.Process(callCtx, cmd)
	if err != nil {
		if cause := ended(ctx); cause != nil {
			// The socket's deadline was the caller's: say so (errors.Is(err,
			// context.DeadlineExceeded)).
			return nil, fmt.Errorf("%w (%w)", cause, err)
		}
		return nil, err
	}
	return cmd.Val(), nil
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

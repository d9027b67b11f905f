package ratelimit

// PermitBlock: a hot key's permits taken from the server a block at a time (one module call),
// handed out locally one by one, and given back (RL.REFUND) when the block's lifetime ends —
// the Node and Python packages' permit blocks, with the same bound (docs/clients.md "Permit
// blocks").
//
// Terms:
//   - block: the permits one grant carried, usable until expiresAt (local monotonic clock),
//     refundable until refundBy;
//   - refill: the one grant in flight per PermitBlock; concurrent callers wait for it.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// DefaultBlockLifetime is a block's longest life unless BlockLifetime says otherwise.
const DefaultBlockLifetime = time.Second

// DefaultRefundGuard is the default refund guard: a fixed window's unused permits are refunded
// only this long before the window's end, else dropped.
const DefaultRefundGuard = 100 * time.Millisecond

// ErrClosed means the PermitBlock was closed.
var ErrClosed = errors.New("ratelimit: PermitBlock is closed")

// BlockOption configures a PermitBlock.
type BlockOption func(*PermitBlock)

// BlockLifetime is a block's longest life (default 1 s).
func BlockLifetime(d time.Duration) BlockOption { return func(p *PermitBlock) { p.lifetime = d } }

// RefillBelow starts the next grant in the background when this many permits or fewer are
// left (default 0: only when empty).
func RefillBelow(n int64) BlockOption { return func(p *PermitBlock) { p.refillBelow = n } }

// RefundGuard sets how long before a fixed window ends its unused permits are still
// refunded (see DefaultRefundGuard).
func RefundGuard(d time.Duration) BlockOption { return func(p *PermitBlock) { p.refundGuard = d } }

// PermitStats are a PermitBlock's counters: Calls (grant requests sent), Refunds (RL.REFUND
// sent), Grants (calls that granted), and permits Granted, Used, Refunded (the server
// confirmed), Dropped.
type PermitStats struct {
	Calls, Refunds, Grants, Granted, Used, Refunded, Dropped int64
}

// PermitBlock hands out a hot key's permits from blocks the server granted.
type PermitBlock struct {
	rl          *Client
	key         string
	limit       Limit
	size        int64
	lifetime    time.Duration
	refillBelow int64
	refundGuard time.Duration
	isPeriod    bool

	mu        sync.Mutex
	blocks    []*block
	refill    *grant
	closed    bool
	stats     PermitStats
	lastLimit int64
	// OnError hears of errors of background work (refunds, background refills).
	OnError func(error)
}

type block struct {
	left      int64
	expiresAt time.Time
	refundBy  time.Time
	timer     *time.Timer
}

// grant is one refill in flight.
type grant struct {
	done    chan struct{}
	refused *Decision
	err     error
}

// NewPermitBlock returns a PermitBlock of size permits per grant on key under limit: a Token
// bucket, a Period (fixed window) or a Leaky bucket with NoDelay. A grant is one call with
// ATMOST size: the server grants what is left, up to size, atomically.
func NewPermitBlock(rl *Client, key string, limit Limit, size int64, opts ...BlockOption) (*PermitBlock, error) {
	p := &PermitBlock{rl: rl, key: key, limit: limit, size: size, lifetime: DefaultBlockLifetime, refundGuard: DefaultRefundGuard}
	for _, o := range opts {
		o(p)
	}
	switch l := limit.(type) {
	case Token:
	case Period:
		p.isPeriod = true
	case Leaky:
		if !l.NoDelay {
			return nil, errors.New("ratelimit: a leaky bucket carries permit blocks only with NoDelay (in delay mode each request has its own delay)")
		}
	case Slide:
		return nil, errors.New("ratelimit: a sliding window cannot carry permit blocks: the server dates a permit at its grant, and RL.REFUND takes back the newest entries (others' use), so neither late use nor refunds stay exact")
	default:
		return nil, fmt.Errorf("ratelimit: PermitBlock takes a Token, Period or Leaky limit (got %T)", limit)
	}
	if _, err := LimitArgs(limit); err != nil {
		return nil, err
	}
	switch {
	case size < 1:
		return nil, errors.New("ratelimit: size must be at least 1")
	case p.lifetime < time.Millisecond:
		return nil, errors.New("ratelimit: the lifetime must be at least 1 ms")
	case p.refillBelow < 0 || p.refillBelow >= size:
		return nil, errors.New("ratelimit: RefillBelow must be 0 … size − 1")
	}
	return p, nil
}

// Held is the permits held now (in unexpired blocks).
func (p *PermitBlock) Held() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.heldLocked(time.Now())
}

func (p *PermitBlock) heldLocked(now time.Time) int64 {
	var n int64
	for _, b := range p.blocks {
		if b.expiresAt.After(now) {
			n += b.left
		}
	}
	return n
}

// Stats is a copy of the counters.
func (p *PermitBlock) Stats() PermitStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Take is one decision: a held permit if there is one, else the (single, shared) refill's
// grant. Remaining is the permits this instance still holds; a refusal carries the server's
// RetryAfter (the wait until one permit is back).
func (p *PermitBlock) Take(ctx context.Context) (Decision, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return Decision{}, ErrClosed
		}
		if d, ok := p.handOutLocked(); ok {
			p.mu.Unlock()
			return d, nil
		}
		g := p.refill
		if g == nil {
			g = p.startRefillLocked()
		}
		p.mu.Unlock()
		select {
		case <-g.done:
		case <-ctx.Done():
			return Decision{}, ctx.Err()
		}
		if g.err != nil {
			return Decision{}, g.err
		}
		if g.refused != nil {
			return *g.refused, nil
		}
	}
}

func (p *PermitBlock) handOutLocked() (Decision, bool) {
	now := time.Now()
	kept := p.blocks[:0]
	for _, b := range p.blocks {
		if b.left > 0 {
			kept = append(kept, b)
		} else {
			b.timer.Stop()
		}
	}
	p.blocks = kept
	for _, b := range p.blocks {
		if !b.expiresAt.After(now) {
			continue // an expired one waits for its timer: never used
		}
		b.left--
		p.stats.Used++
		held := p.heldLocked(now)
		if p.refillBelow > 0 && held <= p.refillBelow && p.refill == nil {
			p.startRefillLocked()
		}
		return Decision{Allowed: true, Limit: p.lastLimit, Remaining: held, ResetAfter: b.expiresAt.Sub(now), Taken: 1}, true
	}
	return Decision{}, false
}

// startRefillLocked sends the next grant in the background (one in flight at a time).
func (p *PermitBlock) startRefillLocked() *grant {
	g := &grant{done: make(chan struct{})}
	p.refill = g
	p.stats.Calls++
	go func() {
		sentAt := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		d, err := p.rl.Limit(ctx, p.key, p.limit, AtMost(p.size))
		cancel()
		p.mu.Lock()
		switch {
		case err != nil:
			g.err = err
		case !d.Allowed || d.Taken == 0:
			p.lastLimit = d.Limit
			refused := Decision{Limit: d.Limit, RetryAfter: d.RetryAfter, ResetAfter: d.ResetAfter}
			g.refused = &refused
		default:
			p.lastLimit = d.Limit
			p.stats.Grants++
			p.stats.Granted += d.Taken
			p.addBlockLocked(d.Taken, sentAt, d.ResetAfter)
		}
		p.refill = nil
		closed := p.closed
		p.mu.Unlock()
		close(g.done)
		if closed {
			p.settleAll()
		}
	}()
	return g
}

func (p *PermitBlock) addBlockLocked(n int64, sentAt time.Time, resetAfter time.Duration) {
	now := time.Now()
	b := &block{left: n, expiresAt: sentAt.Add(p.lifetime)}
	settleAt := b.expiresAt
	if p.isPeriod {
		// The window ends no earlier than windowEnd (the server judged after we sent):
		// permits are used only before it, and refunded only while a refund surely lands in
		// it — settled at windowEnd − guard, sent no later than windowEnd − guard/2, else
		// dropped.
		windowEnd := sentAt.Add(resetAfter)
		if windowEnd.Before(b.expiresAt) {
			b.expiresAt = windowEnd
		}
		b.refundBy = windowEnd.Add(-p.refundGuard / 2)
		if settleBefore := windowEnd.Add(-p.refundGuard); settleBefore.After(now) {
			settleAt = settleBefore
			if b.expiresAt.Before(settleAt) {
				settleAt = b.expiresAt
			}
		} else {
			settleAt = b.expiresAt
		}
	}
	b.timer = time.AfterFunc(time.Until(settleAt), func() { p.settle(b) })
	p.blocks = append(p.blocks, b)
}

// settle ends block b: its unused permits go back (RL.REFUND), or are dropped past a window's
// refundBy.
func (p *PermitBlock) settle(b *block) {
	p.mu.Lock()
	b.timer.Stop()
	for i, x := range p.blocks {
		if x == b {
			p.blocks = append(p.blocks[:i], p.blocks[i+1:]...)
			break
		}
	}
	n := b.left
	b.left = 0
	if n == 0 {
		p.mu.Unlock()
		return
	}
	if !b.refundBy.IsZero() && time.Now().After(b.refundBy) {
		p.stats.Dropped += n
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _, err := p.rl.Refund(ctx, p.key, n)
	p.mu.Lock()
	p.stats.Refunds++
	if err == nil {
		p.stats.Refunded += n // counted once the server has them back
	}
	onError := p.OnError
	p.mu.Unlock()
	if err != nil && onError != nil {
		onError(err)
	}
}

func (p *PermitBlock) settleAll() {
	p.mu.Lock()
	blocks := append([]*block(nil), p.blocks...)
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, b := range blocks {
		wg.Add(1)
		go func(b *block) { defer wg.Done(); p.settle(b) }(b)
	}
	wg.Wait()
}

// Close stops handing out permits and gives the unused ones back (after a grant in flight).
func (p *PermitBlock) Close(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	g := p.refill
	p.mu.Unlock()
	if g != nil {
		select {
		case <-g.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	p.settleAll()
	return nil
}

package ratelimit

import (
	"context"
	"sync"
	"testing"
	"time"
)

// Several PermitBlocks (instances) with many goroutines each drain one key: the admitted
// count never passes what the server granted less what came back — exactly, the admitted
// count plus the tokens the server holds after every Close equal the capacity.
func TestPermitBlocksNeverOverAdmit(t *testing.T) {
	ctx := context.Background()
	c, _ := newClient(t)
	const capacity = 2000
	limit := Token{Capacity: capacity, Rate: 1, Period: time.Hour}
	var blocks []*PermitBlock
	for i := 0; i < 4; i++ {
		p, err := NewPermitBlock(c, "pool", limit, 37, RefillBelow(5), BlockLifetime(50*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, p)
	}
	var mu sync.Mutex
	admitted := 0
	var wg sync.WaitGroup
	for _, p := range blocks {
		for g := 0; g < 25; g++ {
			wg.Add(1)
			go func(p *PermitBlock) {
				defer wg.Done()
				for i := 0; i < 40; i++ {
					d, err := p.Take(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					if d.Allowed {
						mu.Lock()
						admitted++
						mu.Unlock()
					}
				}
			}(p)
		}
	}
	wg.Wait()
	var used, granted, refunded int64
	for _, p := range blocks {
		if err := p.Close(ctx); err != nil {
			t.Fatal(err)
		}
		s := p.Stats()
		used, granted, refunded = used+s.Used, granted+s.Granted, refunded+s.Refunded
	}
	info, err := c.Info(ctx, "pool")
	tokens := int64(capacity)
	if err != nil {
		t.Fatal(err)
	}
	if info != nil {
		tokens, _ = info["tokens"].(int64)
	}
	// 4000 asked of 2000: the pool is drained, and no refill to speak of (1/h).
	if int64(admitted) != used || admitted > capacity || used > granted-refunded {
		t.Fatalf("admitted %d, used %d, granted %d, refunded %d", admitted, used, granted, refunded)
	}
	if int64(admitted)+tokens < capacity-1 || int64(admitted)+tokens > capacity+1 {
		t.Fatalf("admitted %d + tokens left %d, want the capacity %d", admitted, tokens, capacity)
	}
}

// A fixed window's block is used only inside its window and refunded only before its end.
func TestPermitBlockFixedWindowAndRefusal(t *testing.T) {
	ctx := context.Background()
	c, _ := newClient(t)
	p, err := NewPermitBlock(c, "win", Period{Limit: 10, Period: time.Hour}, 4)
	if err != nil {
		t.Fatal(err)
	}
	admitted := 0
	var last Decision
	for i := 0; i < 12; i++ {
		d, err := p.Take(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			admitted++
		}
		last = d
	}
	if admitted != 10 || last.Allowed || last.RetryAfter <= 0 {
		t.Fatalf("admitted %d, last %+v", admitted, last)
	}
	// Grants of 4, 4, then what is left (2): one call each.
	if s := p.Stats(); s.Grants != 3 || s.Granted != 10 {
		t.Fatalf("stats %+v", s)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Take(ctx); err != ErrClosed {
		t.Fatalf("after Close: %v", err)
	}
	for _, bad := range []Limit{Slide{Limit: 1, Window: time.Second}, Leaky{Capacity: 1, Rate: 1, Period: time.Second}} {
		if _, err := NewPermitBlock(c, "k", bad, 1); err == nil {
			t.Fatalf("%T accepted", bad)
		}
	}
	if _, err := NewPermitBlock(c, "k", Token{Capacity: 1, Rate: 1, Period: time.Second}, 4, RefillBelow(4)); err == nil {
		t.Fatal("RefillBelow = size accepted")
	}
}

// Unused permits go back when the block's lifetime ends.
func TestPermitBlockRefundsAtTheEndOfItsLifetime(t *testing.T) {
	ctx := context.Background()
	c, _ := newClient(t)
	p, err := NewPermitBlock(c, "life", Token{Capacity: 100, Rate: 1, Period: time.Hour}, 10, BlockLifetime(30*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := p.Take(ctx); !d.Allowed || d.Remaining != 9 {
		t.Fatalf("%+v", d)
	}
	deadline := time.Now().Add(10 * time.Second)
	for p.Stats().Refunded != 9 {
		if time.Now().After(deadline) {
			t.Fatalf("no refund: %+v", p.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	info, _ := c.Info(ctx, "life")
	if tokens, _ := info["tokens"].(int64); tokens < 99 {
		t.Fatalf("tokens %v after the refund", info["tokens"])
	}
}

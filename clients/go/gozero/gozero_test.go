package gozero_test

import (
	"context"
	"math/rand"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/gozero"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/testserver"
)

var addr string

func TestMain(m *testing.M) { testserver.Main(m, &addr) }

func store(t *testing.T) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	if err := rdb.FlushDB(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	return rdb
}

// A client of a port nothing listens on.
func deadStore(t *testing.T) *redis.Client {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	rdb := redis.NewClient(&redis.Options{Addr: dead, MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// go-zero's testPeriodLimit: 100 takes at quota 5 are 4 Allowed, 1 HitQuota, 95 OverQuota.
func testPeriodLimit(t *testing.T, seconds int, opts ...gozero.PeriodOption) {
	const total, quota = 100, 5
	l := gozero.NewPeriodLimit(seconds, quota, store(t), "periodlimit", opts...)
	var allowed, hitQuota, overQuota int
	for i := 0; i < total; i++ {
		val, err := l.Take("first")
		if err != nil {
			t.Fatal(err)
		}
		switch val {
		case gozero.Allowed:
			allowed++
		case gozero.HitQuota:
			hitQuota++
		case gozero.OverQuota:
			overQuota++
		default:
			t.Fatalf("unknown status %d", val)
		}
	}
	if allowed != quota-1 || hitQuota != 1 || overQuota != total-quota {
		t.Fatalf("allowed %d, hit %d, over %d", allowed, hitQuota, overQuota)
	}
}

// 5 s windows (go-zero's test: 1 s) so that 100 takes on a busy machine stay in one.
func TestPeriodLimit_Take(t *testing.T) { testPeriodLimit(t, 5) }

// Aligned windows are per minute here, so 100 takes do not straddle a boundary by chance.
func TestPeriodLimit_TakeWithAlign(t *testing.T) {
	testPeriodLimit(t, 60, gozero.Align())
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	fields, err := ratelimit.New(rdb).Info(context.Background(), "periodlimitrl:first")
	if err != nil {
		t.Fatal(err)
	}
	_, offset := time.Now().Zone()
	want := int64(time.Duration(offset)*time.Second%time.Minute) / int64(time.Millisecond)
	if fields["align"] != int64(1) || fields["utc_offset_ms"] != want || fields["period_ms"] != int64(60000) {
		t.Fatalf("RL.INFO %v", fields)
	}
}

func TestPeriodLimit_RedisUnavailable(t *testing.T) {
	l := gozero.NewPeriodLimit(1, 5, deadStore(t), "periodlimit")
	val, err := l.Take("first")
	if err == nil || val != gozero.Unknown {
		t.Fatalf("val %d, err %v", val, err)
	}
}

func TestQuotaFull(t *testing.T) {
	l := gozero.NewPeriodLimit(1, 1, store(t), "periodlimit")
	if val, err := l.Take("first"); err != nil || val != gozero.HitQuota {
		t.Fatalf("val %d, err %v", val, err)
	}
	if val, _ := gozero.NewPeriodLimit(1, 0, store(t), "p").Take("zero"); val != gozero.OverQuota {
		t.Fatalf("quota 0: %d", val)
	}
}

func TestTokenLimit_WithCtx(t *testing.T) {
	l := gozero.NewTokenLimiter(5, 10, store(t), "tokenlimit")
	ctx, cancel := context.WithCancel(context.Background())
	if !l.AllowCtx(ctx) {
		t.Fatal("first refused")
	}
	cancel()
	for i := 0; i < 100; i++ {
		if l.AllowCtx(ctx) {
			t.Fatal("allowed on a cancelled context")
		}
	}
}

func TestTokenLimit_Take(t *testing.T) {
	const total, rate, burst = 100, 5, 10
	l := gozero.NewTokenLimiter(rate, burst, store(t), "tokenlimit")
	var allowed int
	start := time.Now()
	for i := 0; i < total; i++ {
		time.Sleep(time.Second / time.Duration(total))
		if l.Allow() {
			allowed++
		}
	}
	elapsed := time.Since(start)
	most := burst + int(float64(rate)*elapsed.Seconds()) + 1
	if allowed < burst+rate || allowed > most {
		t.Fatalf("allowed %d, want %d … %d", allowed, burst+rate, most)
	}
}

func TestTokenLimit_TakeBurst(t *testing.T) {
	l := gozero.NewTokenLimiter(5, 10, store(t), "tokenlimit")
	var allowed int
	start := time.Now()
	for i := 0; i < 100; i++ {
		if l.Allow() {
			allowed++
		}
	}
	// The burst, and the refill of the time the calls took (5/s).
	if most := 10 + int(5*time.Since(start).Seconds()) + 1; allowed < 10 || allowed > most {
		t.Fatalf("allowed %d, want the burst (10 … %d)", allowed, most)
	}
}

// When Redis is down: refused by default, admitted with FailOpen, judged in process with
// Rescue; OnError hears of it each time.
func TestTokenLimit_RedisDown(t *testing.T) {
	var errs atomic.Int64
	closed := gozero.NewTokenLimiter(5, 10, deadStore(t), "t", gozero.OnError(func(error) { errs.Add(1) }))
	open := gozero.NewTokenLimiter(5, 10, deadStore(t), "t", gozero.FailOpen())
	rescued := gozero.NewTokenLimiter(5, 10, deadStore(t), "t", gozero.Rescue())
	var rescuedAllowed int
	start := time.Now()
	for i := 0; i < 5; i++ {
		if closed.Allow() {
			t.Fatal("admitted with Redis down")
		}
		if !open.Allow() {
			t.Fatal("FailOpen refused")
		}
		if rescued.Allow() {
			rescuedAllowed++
		}
	}
	// The rescue's own bucket (rate 5, burst 10) admits the first 5 at once.
	most := 10 + int(5*time.Since(start).Seconds()) + 1
	if errs.Load() != 5 || rescuedAllowed != 5 || rescuedAllowed > most {
		t.Fatalf("errors %d, rescued admitted %d", errs.Load(), rescuedAllowed)
	}
}

// 100 goroutines on one hot key: exactly the burst is admitted (no refill within the test:
// 1 per hour).
func TestTokenLimit_HotKeyExact(t *testing.T) {
	rdb := store(t)
	l := gozero.NewTokenLimiter(1, 300, rdb, "hot")
	start := time.Now()
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 100; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				if l.Allow() {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	// 1 per second: at most the seconds the test takes refill more.
	if got, most := admitted.Load(), 301+int64(time.Since(start).Seconds()); got < 300 || got > most {
		t.Fatalf("admitted %d, want the burst of 300 (+ a refill per second)", got)
	}
}

// call is one TokenLimiter call as the client saw it: sent at send, answered at recv.
type call struct {
	send, recv time.Time
	allowed    bool
}

// overAdmission is the largest excess, over every interval [a, b] between one call's send
// and a later call's answer, of the admitted calls judged inside it (sent at or after a,
// answered by b) over what a token bucket can admit in b − a: burst + rate·(b − a + 1 ms).
// Sound on the server's clock: each of those calls was judged within [a, b], by a clock that
// reads whole milliseconds (an instant just after a can read as the ms before it).
func overAdmission(calls []call, rate, burst int) int {
	sort.Slice(calls, func(i, j int) bool { return calls[i].send.Before(calls[j].send) })
	worst := 0
	for i := range calls {
		a := calls[i].send
		var inside []time.Time
		for j := i; j < len(calls); j++ {
			if calls[j].allowed {
				inside = append(inside, calls[j].recv)
			}
		}
		sort.Slice(inside, func(x, y int) bool { return inside[x].Before(inside[y]) })
		for k, b := range inside {
			bound := burst + int(float64(rate)*(b.Sub(a)+time.Millisecond).Seconds()+1e-9)
			// every admitted call sent at or after a and answered by b (the k+1 earliest
			// answers among those sent at or after a)
			if excess := k + 1 - bound; excess > worst {
				worst = excess
			}
		}
	}
	return worst
}

// The second-boundary case, as a property over random rates, bursts and phases: calls from
// several goroutines straddling whole-second boundaries never get more than a token bucket
// can give in any interval (go-zero's script, on the client's whole seconds, admits up to
// twice the rate around a boundary).
func TestTokenLimit_NoOverAdmissionAcrossSecondBoundaries(t *testing.T) {
	if testing.Short() {
		t.Skip("drives traffic across second boundaries (seconds)")
	}
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	rdb := store(t)
	for round := 0; round < 3; round++ {
		rate, burst := 2+rng.Intn(20), 1+rng.Intn(20)
		goroutines := 2 + rng.Intn(8)
		l := gozero.NewTokenLimiter(rate, burst, rdb, "boundary")
		// Start a random 0–300 ms before a whole second, run 1.2 s.
		now := time.Now()
		next := now.Truncate(time.Second).Add(time.Second)
		time.Sleep(time.Until(next.Add(-time.Duration(rng.Intn(300)) * time.Millisecond)))
		stop := time.Now().Add(1200 * time.Millisecond)
		var mu sync.Mutex
		var calls []call
		var wg sync.WaitGroup
		for g := 0; g < goroutines; g++ {
			wg.Add(1)
			pause := rand.New(rand.NewSource(rng.Int63()))
			go func() {
				defer wg.Done()
				for time.Now().Before(stop) {
					c := call{send: time.Now()}
					c.allowed = l.Allow()
					c.recv = time.Now()
					mu.Lock()
					calls = append(calls, c)
					mu.Unlock()
					time.Sleep(time.Duration(pause.Intn(3)) * time.Millisecond)
				}
			}()
		}
		wg.Wait()
		if excess := overAdmission(calls, rate, burst); excess > 0 {
			t.Fatalf("rate %d burst %d: %d admitted beyond the bucket's bound", rate, burst, excess)
		}
		_ = rdb.Del(context.Background(), "{boundary}.bucket").Err()
	}
}

// The checker itself: go-zero's whole-second refill (a model of its script) is caught.
func TestOverAdmissionCatchesWholeSecondRefill(t *testing.T) {
	const rate, burst = 5, 5
	base := time.Now().Truncate(time.Second).Add(time.Second)
	var calls []call
	tokens, last := burst, base.Add(-time.Second).Unix()
	for ms := 900; ms < 1100; ms += 10 {
		at := base.Add(time.Duration(ms-1000) * time.Millisecond)
		sec := at.Unix()
		tokens = min(burst, tokens+int(sec-last)*rate)
		last = sec
		allowed := tokens >= 1
		if allowed {
			tokens--
		}
		calls = append(calls, call{send: at, recv: at.Add(time.Millisecond), allowed: allowed})
	}
	if overAdmission(calls, rate, burst) == 0 {
		t.Fatal("a whole-second refill across a boundary went unnoticed")
	}
}

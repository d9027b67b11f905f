package httplimit_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/httplimit"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/testserver"
)

var addr string

func TestMain(m *testing.M) { testserver.Main(m, &addr) }

func client(t *testing.T) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })

func serve(h http.Handler, remote string, header ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = remote
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func mustNew(t *testing.T, o httplimit.Options) *httplimit.Limiter {
	t.Helper()
	l, err := httplimit.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// The shared layout file of the Node, Python and Go packages.
type layout struct {
	Prefix     string      `json:"prefix"`
	IPv6Subnet int         `json:"ipv6_subnet"`
	Addresses  [][2]string `json:"addresses"`
}

func readLayout(t *testing.T) layout {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "key-layout.json"))
	if err != nil {
		t.Fatal(err)
	}
	var l layout
	if err := json.Unmarshal(data, &l); err != nil {
		t.Fatal(err)
	}
	return l
}

func TestAddressKeyFollowsTheSharedLayout(t *testing.T) {
	l := readLayout(t)
	if l.Prefix != httplimit.ServerPolicyPrefix || len(l.Addresses) == 0 {
		t.Fatalf("layout %+v", l)
	}
	for _, a := range l.Addresses {
		if got := httplimit.AddressKey(a[0], l.IPv6Subnet); got != a[1] {
			t.Errorf("AddressKey(%q) = %q, want %q", a[0], got, a[1])
		}
	}
	if got := httplimit.AddressKey("2001:db8::1", 128); got != "2001:db8::1" {
		t.Errorf("subnet 128: %q", got)
	}
}

// On a server policy the key is ratelimit:<tenant>, whatever the policy, and a tenant keeps its
// counter across tiers; RateLimit-Policy carries the policy's window.
func TestServerPolicyKeyLayout(t *testing.T) {
	ctx := context.Background()
	rdb := client(t)
	rl := ratelimit.New(rdb)
	if err := rl.SetPolicy(ctx, "free", ratelimit.Period{Limit: 100, Period: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := rl.SetPolicy(ctx, "pro", ratelimit.Period{Limit: 1000, Period: time.Minute}); err != nil {
		t.Fatal(err)
	}
	free := mustNew(t, httplimit.Options{Client: rl, Policy: "free"})
	lay := readLayout(t)
	for _, a := range lay.Addresses {
		remote := a[0]
		if strings.Contains(remote, ":") {
			remote = "[" + remote + "]:1234"
		} else {
			remote += ":1234"
		}
		w := serve(free.Handler(ok), remote)
		if w.Code != http.StatusOK {
			t.Fatalf("%s: %d", a[0], w.Code)
		}
		if n, _ := rdb.Exists(ctx, lay.Prefix+a[1]).Result(); n != 1 {
			t.Errorf("%s: key %s%s missing", a[0], lay.Prefix, a[1])
		}
		if got := w.Header().Get("RateLimit-Policy"); got != `"free";q=100;w=60` {
			t.Errorf("RateLimit-Policy %q", got)
		}
	}
	byTenant := func(policy string) http.Handler {
		return mustNew(t, httplimit.Options{Client: rl, Policy: policy, Key: func(r *http.Request) (string, error) {
			return r.Header.Get("X-Tenant"), nil
		}}).Handler(ok)
	}
	serve(byTenant("free"), "127.0.0.1:1", "X-Tenant", "t1")
	serve(byTenant("pro"), "127.0.0.1:1", "X-Tenant", "t1")
	info, err := rl.Info(ctx, "ratelimit:t1")
	if err != nil || info["used"] != int64(2) {
		t.Fatalf("ratelimit:t1 %v %v", info, err)
	}
	if keys, _ := rdb.Keys(ctx, "rl:policy:*").Result(); len(keys) != 0 {
		t.Fatalf("stray keys %v", keys)
	}
}

// An own limit: the headers of every reply, 429 with Retry-After and a JSON body, and the
// Node package's namespace for the same limit.
func TestOwnLimitHeadersAndRefusal(t *testing.T) {
	ctx := context.Background()
	rdb := client(t)
	// 1 token back per hour: nothing refills while the test runs.
	l := mustNew(t, httplimit.Options{Redis: rdb, Limit: ratelimit.Token{Capacity: 10, Rate: 1, Period: time.Hour}})
	h := l.Handler(ok)
	for i := 1; i <= 10; i++ {
		w := serve(h, "198.51.100.4:5555")
		if w.Code != http.StatusOK {
			t.Fatalf("request %d: %d", i, w.Code)
		}
		if got := w.Header().Get("RateLimit-Policy"); got != `"default";q=10;w=36000` {
			t.Fatalf("RateLimit-Policy %q", got)
		}
		want := `"default";r=` + strconv.Itoa(10-i) + ";t="
		if got := w.Header().Get("RateLimit"); !strings.HasPrefix(got, want) {
			t.Fatalf("RateLimit %q, want %s…", got, want)
		}
	}
	w := serve(h, "198.51.100.4:5555")
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "3600" {
		t.Fatalf("%d, Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
	var body struct {
		Error        string `json:"error"`
		RetryAfterMs int64  `json:"retryAfterMs"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.Error != "too many requests" || body.RetryAfterMs <= 3_599_000 || body.RetryAfterMs > 3_600_000 {
		t.Fatalf("body %s %v", w.Body.String(), err)
	}
	// rl:token:<sha256("RL.TOKEN\x0010\x001\x003600000")[:8]>:<address>, as Node names it.
	if n, _ := rdb.Exists(ctx, "rl:token:485c02da:198.51.100.4").Result(); n != 1 {
		keys, _ := rdb.Keys(ctx, "rl:*").Result()
		t.Fatalf("keys %v", keys)
	}
	// Another tenant is counted apart; Skip exempts.
	if serve(h, "198.51.100.5:1").Code != http.StatusOK {
		t.Fatal("another address refused")
	}
	skipping := mustNew(t, httplimit.Options{Redis: rdb, Limit: ratelimit.Token{Capacity: 10, Rate: 1, Period: time.Second},
		Skip: func(r *http.Request) bool { return r.URL.Path == "/" }})
	if serve(skipping.Handler(ok), "198.51.100.4:5555").Code != http.StatusOK {
		t.Fatal("Skip did not exempt")
	}
}

// A leaky bucket in delay mode holds an admitted request for its delay.
func TestLeakyDelayHoldsTheRequest(t *testing.T) {
	rdb := client(t)
	prefix := "leaky-delay:"
	l := mustNew(t, httplimit.Options{Redis: rdb, Prefix: &prefix,
		Limit: ratelimit.Leaky{Capacity: 5, Rate: 1, Period: 300 * time.Millisecond},
		Key:   func(*http.Request) (string, error) { return "k", nil }})
	h := l.Handler(ok)
	serve(h, "127.0.0.1:1")
	var order []string
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		serve(h, "127.0.0.1:1")
		mu.Lock()
		order = append(order, "second")
		mu.Unlock()
		close(done)
	}()
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	order = append(order, "timer")
	mu.Unlock()
	<-done
	if strings.Join(order, ",") != "timer,second" {
		t.Fatalf("order %v", order)
	}
}

// A server that never answers: the decision ends at the timeout; fail closed answers 503, fail
// open lets the request through.
func TestTimeoutFailClosedAndOpen(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	silent := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), MaxRetries: -1, ReadTimeout: time.Minute})
	defer silent.Close()
	limit := ratelimit.Token{Capacity: 10, Rate: 1, Period: time.Second}
	var seen error
	closed := mustNew(t, httplimit.Options{Redis: silent, Limit: limit, Timeout: 100 * time.Millisecond,
		Error: func(w http.ResponseWriter, r *http.Request, err error) {
			seen = err
			w.WriteHeader(http.StatusServiceUnavailable)
		}})
	start := time.Now()
	if w := serve(closed.Handler(ok), "127.0.0.1:1"); w.Code != http.StatusServiceUnavailable {
		t.Fatalf("fail closed: %d", w.Code)
	}
	if !errors.Is(seen, httplimit.ErrTimeout) {
		t.Fatalf("error %v", seen)
	}
	if time.Since(start) > 30*time.Second {
		t.Fatal("the timeout did not bound the decision")
	}
	open := mustNew(t, httplimit.Options{Redis: silent, Limit: limit, Timeout: 100 * time.Millisecond, FailOpen: true})
	if w := serve(open.Handler(ok), "127.0.0.1:1"); w.Code != http.StatusOK {
		t.Fatalf("fail open: %d", w.Code)
	}
	counts := httplimit.DecisionCounts()
	var errorsCounted uint64
	for _, c := range counts {
		errorsCounted += c.Counts[2]
	}
	if errorsCounted < 2 {
		t.Fatalf("counts %+v", counts)
	}
}

// Check is the form for routers with their own handler type (gin: abort when false).
func TestCheckForOtherRouters(t *testing.T) {
	rdb := client(t)
	prefix := "check:"
	l := mustNew(t, httplimit.Options{Redis: rdb, Prefix: &prefix, Limit: ratelimit.Period{Limit: 1, Period: time.Minute}})
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	first, second := httptest.NewRecorder(), httptest.NewRecorder()
	if !l.Check(first, r) || l.Check(second, r) || second.Code != http.StatusTooManyRequests {
		t.Fatalf("first %d, second %d", first.Code, second.Code)
	}
	if _, err := httplimit.New(httplimit.Options{Redis: rdb}); err == nil {
		t.Fatal("no limit and no policy accepted")
	}
	if _, err := httplimit.New(httplimit.Options{Redis: rdb, Limit: ratelimit.Token{Capacity: 0, Rate: 1, Period: time.Second}}); err == nil {
		t.Fatal("capacity 0 accepted")
	}
}

// A SHADOW policy's would-be refusal is admitted with a retry time: the request is let through
// at once, never held for it.
func TestShadowPolicyNeverHolds(t *testing.T) {
	ctx := context.Background()
	rdb := client(t)
	rl := ratelimit.New(rdb)
	if err := rl.SetPolicy(ctx, "shadow5", ratelimit.Period{Limit: 5, Period: time.Minute}, ratelimit.PolicyShadow()); err != nil {
		t.Fatal(err)
	}
	l := mustNew(t, httplimit.Options{Client: rl, Policy: "shadow5", Key: func(*http.Request) (string, error) { return "tenant-shadow", nil }})
	for i := 1; i <= 6; i++ {
		done := make(chan int, 1)
		go func() { done <- serve(l.Handler(ok), "127.0.0.1:1").Code }()
		select {
		case code := <-done:
			if code != http.StatusOK {
				t.Fatalf("request %d: %d", i, code)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("request %d held for the policy's retry time", i)
		}
	}
	if stats, _ := rl.PolicyStats(ctx, "shadow5"); stats["shadow_limited"] != 1 {
		t.Fatalf("stats %v", stats)
	}
}

// A failed decision is never silent: OnError is told in both modes, and the failure is logged,
// rate-limited (one line per LogEvery with the failures counted meanwhile).
func TestFailuresLoggedAndReported(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := ln.Addr().String()
	ln.Close() // nothing listens there now: every decision fails at once
	dead := redis.NewClient(&redis.Options{Addr: deadAddr, MaxRetries: -1})
	defer dead.Close()
	limit := ratelimit.Token{Capacity: 10, Rate: 1, Period: time.Second}
	for _, failOpen := range []bool{false, true} {
		var logged strings.Builder
		var mu sync.Mutex
		var told []error
		l := mustNew(t, httplimit.Options{Redis: dead, Limit: limit, FailOpen: failOpen,
			Logger:   slog.New(slog.NewTextHandler(&logged, nil)),
			LogEvery: time.Hour,
			OnError: func(r *http.Request, err error) {
				mu.Lock()
				defer mu.Unlock()
				told = append(told, err)
			}})
		want := http.StatusServiceUnavailable
		if failOpen {
			want = http.StatusOK
		}
		for i := 0; i < 3; i++ {
			if w := serve(l.Handler(ok), "127.0.0.1:1"); w.Code != want {
				t.Fatalf("failOpen %v: %d, want %d", failOpen, w.Code, want)
			}
		}
		if len(told) != 3 || told[0] == nil {
			t.Fatalf("failOpen %v: OnError told %v, want 3 errors", failOpen, told)
		}
		lines := strings.Split(strings.TrimSpace(logged.String()), "\n")
		if len(lines) != 1 || !strings.Contains(lines[0], "level=ERROR") || !strings.Contains(lines[0], "decision failed") {
			t.Fatalf("failOpen %v: logged %q, want one line (the others within LogEvery)", failOpen, logged.String())
		}
	}
}

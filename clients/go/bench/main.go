// Command bench measures the Go package's drop-ins against the host libraries' own Lua
// backends on one server with the module loaded, in one run (make bench-go): Redis server
// time per decision (INFO commandstats usec of the commands the client sent; a script's
// inner commands run inside its EVALSHA) and decisions per second, for
//
//	redisrate           vs go-redis/redis_rate v10 (GCRA in Lua)
//	limiterstore        vs ulule/limiter v3's Redis store (INCRBY + PEXPIRE in Lua)
//	gozero PeriodLimit  vs go-zero's PeriodLimit (INCRBY + EXPIRE in Lua)
//	gozero TokenLimiter vs go-zero's TokenLimiter (two keys in Lua)
//
// Each pair runs in alternating rounds (stock, ours, stock, …) on a flushed server; the
// medians over the rounds are written to bench/CLIENTS.md "## Go" (--write).
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	redis_rate_stock "github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/ulule/limiter/v3"
	ululeredis "github.com/ulule/limiter/v3/drivers/store/redis"
	zerolimit "github.com/zeromicro/go-zero/core/limit"
	"github.com/zeromicro/go-zero/core/logx"
	zeroredis "github.com/zeromicro/go-zero/core/stores/redis"

	"github.com/redis-ratelimit/redis-ratelimit/clients/go/gozero"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/testserver"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/limiterstore"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/redisrate"
)

var (
	decisions  = flag.Int("decisions", 40000, "decisions per run")
	workers    = flag.Int("goroutines", 16, "goroutines deciding concurrently")
	keys       = flag.Int("keys", 10000, "keys drawn at random per decision")
	rounds     = flag.Int("rounds", 5, "rounds per pair (each runs stock and ours once)")
	write      = flag.String("write", "", "bench/CLIENTS.md to write the Go section into")
	hotWorkers = 100
)

// decide makes one decision on key i; it reports whether it was admitted.
type decide func(ctx context.Context, i int) (bool, error)

type result struct {
	serverUs  float64 // server µs per decision
	perSecond float64 // decisions per second
	commands  float64 // top-level commands per decision
	inner     float64 // commands run inside scripts per decision
	refused   int64
}

type stat struct{ calls, usec int64 }

var statLine = regexp.MustCompile(`^cmdstat_([^:]+):calls=(\d+),usec=(\d+),`)

func commandStats(ctx context.Context, rdb *redis.Client) map[string]stat {
	text, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		panic(err)
	}
	out := map[string]stat{}
	for _, line := range strings.Split(text, "\n") {
		m := statLine.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		calls, _ := strconv.ParseInt(m[2], 10, 64)
		usec, _ := strconv.ParseInt(m[3], 10, 64)
		out[m[1]] = stat{calls, usec}
	}
	return out
}

// sent: the commands a client sends (top level); everything else ran inside a script.
func sent(name string) bool {
	return strings.HasPrefix(name, "eval") || strings.HasPrefix(name, "rl.") || name == "cl.throttle"
}

func run(ctx context.Context, admin *redis.Client, f decide) result {
	if err := admin.FlushAll(ctx).Err(); err != nil {
		panic(err)
	}
	// Warm up (scripts loaded, connections open), then measure from a reset.
	for i := 0; i < 200; i++ {
		if _, err := f(ctx, i%*keys); err != nil {
			panic(err)
		}
	}
	if err := admin.ConfigResetStat(ctx).Err(); err != nil {
		panic(err)
	}
	var next, refused atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < *workers; w++ {
		wg.Add(1)
		rng := rand.New(rand.NewSource(int64(w)))
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(*decisions) {
				ok, err := f(ctx, rng.Intn(*keys))
				if err != nil {
					panic(err)
				}
				if !ok {
					refused.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	var usec, calls, inner int64
	for name, s := range commandStats(ctx, admin) {
		switch {
		case name == "config" || name == "info":
		case sent(name):
			usec += s.usec
			calls += s.calls
		default:
			inner += s.calls
		}
	}
	n := float64(*decisions)
	return result{
		serverUs:  float64(usec) / n,
		perSecond: n / elapsed.Seconds(),
		commands:  float64(calls) / n,
		inner:     float64(inner) / n,
		refused:   refused.Load(),
	}
}

type pair struct {
	name, stock, ours string
	limit             string
	stockRun, oursRun decide
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func main() {
	flag.Parse()
	logx.Disable()
	ctx := context.Background()
	server, err := testserver.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer server.Stop()
	admin := server.Client()
	defer admin.Close()
	rdb := redis.NewClient(&redis.Options{Addr: server.Addr, PoolSize: *workers * 2})
	defer rdb.Close()
	zrdb := zeroredis.New(server.Addr)
	key := func(prefix string, i int) string { return prefix + strconv.Itoa(i) }

	stockRate := redis_rate_stock.NewLimiter(rdb)
	oursRate := redisrate.NewLimiter(rdb)
	stockStore, err := ululeredis.NewStoreWithOptions(rdb, limiter.StoreOptions{Prefix: "ulule"})
	if err != nil {
		panic(err)
	}
	oursStore, _ := limiterstore.NewStoreWithOptions(rdb, limiter.StoreOptions{Prefix: "ulule"})
	rate := limiter.Rate{Limit: 1_000_000, Period: time.Minute}
	stockUlule, oursUlule := limiter.New(stockStore, rate), limiter.New(oursStore, rate)
	stockPeriod := zerolimit.NewPeriodLimit(60, 1_000_000, zrdb, "zp:")
	oursPeriod := gozero.NewPeriodLimit(60, 1_000_000, rdb, "zp:")
	stockTokens := make([]*zerolimit.TokenLimiter, *keys)
	oursTokens := make([]*gozero.TokenLimiter, *keys)
	for i := range stockTokens {
		stockTokens[i] = zerolimit.NewTokenLimiter(1_000_000, 1_000_000, zrdb, key("zt:", i))
		oursTokens[i] = gozero.NewTokenLimiter(1_000_000, 1_000_000, rdb, key("zt:", i))
	}

	pairs := []pair{
		{
			name: "go-redis/redis_rate v10 `Allow`", stock: "redis_rate (GCRA in Lua)", ours: "`redisrate`",
			limit: "PerSecond(1000000) per key",
			stockRun: func(ctx context.Context, i int) (bool, error) {
				r, err := stockRate.Allow(ctx, key("r", i), redis_rate_stock.PerSecond(1_000_000))
				return err == nil && r.Allowed == 1, err
			},
			oursRun: func(ctx context.Context, i int) (bool, error) {
				r, err := oursRate.Allow(ctx, key("r", i), redisrate.PerSecond(1_000_000))
				return err == nil && r.Allowed == 1, err
			},
		},
		{
			name: "ulule/limiter v3 `Get`", stock: "ulule's Redis store (Lua)", ours: "`limiterstore`",
			limit: "1000000 per minute per key",
			stockRun: func(ctx context.Context, i int) (bool, error) {
				c, err := stockUlule.Get(ctx, key("u", i))
				return err == nil && !c.Reached, err
			},
			oursRun: func(ctx context.Context, i int) (bool, error) {
				c, err := oursUlule.Get(ctx, key("u", i))
				return err == nil && !c.Reached, err
			},
		},
		{
			name: "go-zero `PeriodLimit.Take`", stock: "go-zero (Lua)", ours: "`gozero`",
			limit: "1000000 per 60 s per key",
			stockRun: func(ctx context.Context, i int) (bool, error) {
				c, err := stockPeriod.TakeCtx(ctx, key("p", i))
				return c == zerolimit.Allowed, err
			},
			oursRun: func(ctx context.Context, i int) (bool, error) {
				c, err := oursPeriod.TakeCtx(ctx, key("p", i))
				return c == gozero.Allowed, err
			},
		},
		{
			name: "go-zero `TokenLimiter.Allow`", stock: "go-zero (Lua, two keys)", ours: "`gozero`",
			limit:    "rate 1000000/s, burst 1000000 per key",
			stockRun: func(ctx context.Context, i int) (bool, error) { return stockTokens[i].AllowCtx(ctx), nil },
			oursRun:  func(ctx context.Context, i int) (bool, error) { return oursTokens[i].AllowCtx(ctx), nil },
		},
	}

	var rows []string
	var notes []string
	for _, p := range pairs {
		var stock, ours []result
		for r := 0; r < *rounds; r++ {
			stock = append(stock, run(ctx, admin, p.stockRun))
			ours = append(ours, run(ctx, admin, p.oursRun))
		}
		pick := func(rs []result, f func(result) float64) float64 {
			xs := make([]float64, len(rs))
			for i, r := range rs {
				xs[i] = f(r)
			}
			return median(xs)
		}
		su, ou := pick(stock, func(r result) float64 { return r.serverUs }), pick(ours, func(r result) float64 { return r.serverUs })
		sd, od := pick(stock, func(r result) float64 { return r.perSecond }), pick(ours, func(r result) float64 { return r.perSecond })
		sc, oc := pick(stock, func(r result) float64 { return r.commands }), pick(ours, func(r result) float64 { return r.commands })
		si := pick(stock, func(r result) float64 { return r.inner })
		var refused int64
		for _, r := range append(stock, ours...) {
			refused += r.refused
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %.2f µs | %.2f µs | %.2f | %s | %s | %.2f | %.2f (+ %.2f inside the script) | %.2f |",
			p.name, p.limit, su, ou, ou/su, thousands(sd), thousands(od), od/sd, sc, si, oc))
		verdict := "met"
		if ou/su > 0.5 {
			verdict = "NOT met"
		}
		notes = append(notes, fmt.Sprintf("- %s: server time %.2f × %s's (bar ≤ 0.5: %s); refused decisions in all rounds: %d.", p.ours+" vs "+p.stock, ou/su, p.stock, verdict, refused))
		fmt.Println(rows[len(rows)-1])
	}
	hot := hotKey(ctx, admin, rdb)
	fmt.Println(hot)

	version, _ := admin.Info(ctx, "server").Result()
	serverVersion := "?"
	for _, line := range strings.Split(version, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			serverVersion = v
		}
	}
	section := fmt.Sprintf(`## Go

`+"`make bench-go`"+` (clients/go/bench, %s; %d vCPUs, %s, redis-server %s with the module, one run):
each drop-in against the host library it replaces, run from the host modules themselves
(redis_rate v10.0.1, ulule/limiter v3.11.2, go-zero v1.10.3) on the same server and go-redis
client. %d decisions per run by %d goroutines, the key drawn at random from %d per decision,
limits that never bind; %d rounds per pair alternating stock and ours on a flushed server,
medians shown. Server time: INFO commandstats usec of the commands the client sent (EVALSHA,
whose time includes the commands its script runs; RL.*), per decision.

| decision | limit | server time stock | ours | ratio | decisions/s stock | ours | ratio | commands per decision stock | ours |
|---|---|---:|---:|---:|---:|---:|---:|---:|---:|
%s

%s
- %s

`, time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), runtime.Version(), serverVersion,
		*decisions, *workers, *keys, *rounds, strings.Join(rows, "\n"), strings.Join(notes, "\n"), hot)
	if *write != "" {
		if err := writeSection(*write, section); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	} else {
		fmt.Print(section)
	}
}

// hotKey: 100 goroutines on one key of redisrate with a burst of 5000 and no refill to
// speak of: admitted must be exactly 5000.
func hotKey(ctx context.Context, admin, rdb *redis.Client) string {
	_ = admin.FlushAll(ctx).Err()
	l := redisrate.NewLimiter(rdb)
	limit := redisrate.Limit{Rate: 1, Period: time.Hour, Burst: 5000}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < hotWorkers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				r, err := l.Allow(ctx, "hot", limit)
				if err != nil {
					panic(err)
				}
				admitted.Add(int64(r.Allowed))
			}
		}()
	}
	wg.Wait()
	over := admitted.Load() - 5000
	return fmt.Sprintf("Hot key: %d goroutines × 100 `redisrate` Allow calls on one key of burst 5000 (refill 1/hour): %d admitted, over-admission %d.",
		hotWorkers, admitted.Load(), over)
}

func thousands(x float64) string {
	s := strconv.FormatInt(int64(x+0.5), 10)
	var b bytes.Buffer
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// writeSection replaces the "## Go" section of path (up to the next "## " heading), or
// appends it.
func writeSection(path, section string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	text := string(data)
	start := strings.Index(text, "\n## Go\n")
	if start < 0 {
		return os.WriteFile(path, []byte(strings.TrimRight(text, "\n")+"\n\n"+strings.TrimRight(section, "\n")+"\n"), 0o644)
	}
	start++
	end := strings.Index(text[start+1:], "\n## ")
	rest := ""
	if end >= 0 {
		rest = text[start+1+end+1:]
	}
	return os.WriteFile(path, []byte(text[:start]+section+rest), 0o644)
}

package rlprom_test

import (
	"context"
	"net"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/testserver"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/rlprom"
)

var addr string

func TestMain(m *testing.M) { testserver.Main(m, &addr) }

func gather(t *testing.T, c prometheus.Collector) map[string][]*dto.Metric {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]*dto.Metric{}
	for _, f := range families {
		out[f.GetName()] = f.GetMetric()
	}
	return out
}

func value(ms []*dto.Metric, labels ...string) float64 {
	for _, m := range ms {
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
					found = true
				}
			}
			match = match && found
		}
		if match {
			if m.Counter != nil {
				return m.Counter.GetValue()
			}
			return m.Gauge.GetValue()
		}
	}
	return -1
}

// The metric names are the Node and Python packages'; the values are the server's counters.
func TestMetrics(t *testing.T) {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	rl := ratelimit.New(rdb)
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rl.ResetTop(ctx); err != nil {
		t.Fatal(err)
	}
	limit := ratelimit.Period{Limit: 2, Period: time.Minute}
	for i := 0; i < 5; i++ {
		if _, err := rl.Limit(ctx, "m:hot", limit); err != nil {
			t.Fatal(err)
		}
	}
	if err := rl.SetPolicy(ctx, "free", limit); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		_, _ = rl.Hit(ctx, "free", "m:tenant")
	}
	c, err := rlprom.NewCollector(rl, rlprom.TopKeys(5))
	if err != nil {
		t.Fatal(err)
	}
	m := gather(t, c)
	var names []string
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, want := range []string{
		"ratelimit_up", "ratelimit_decisions_total", "ratelimit_calls_total", "ratelimit_errors_total",
		"ratelimit_policy_decisions_total", "ratelimit_waiting", "ratelimit_wait_admitted_total",
		"ratelimit_wait_timeouts_total", "ratelimit_top_refusals", "ratelimit_top_error_bound",
		"ratelimit_top_key_refused",
	} {
		if m[want] == nil {
			t.Errorf("missing %s (have %s)", want, strings.Join(names, ", "))
		}
	}
	checks := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"ratelimit_up", nil, 1},
		{"ratelimit_decisions_total", []string{"command", "period", "outcome", "admitted"}, 2},
		{"ratelimit_decisions_total", []string{"command", "period", "outcome", "limited"}, 3},
		{"ratelimit_policy_decisions_total", []string{"policy", "free", "outcome", "limited"}, 1},
		{"ratelimit_top_key_refused", []string{"key", "m:hot"}, 3},
	}
	for _, ck := range checks {
		if got := value(m[ck.name], ck.labels...); got != ck.want {
			t.Errorf("%s%v = %v, want %v", ck.name, ck.labels, got, ck.want)
		}
	}
}

// A server that does not answer: ratelimit_up 0 within the scrape timeout.
func TestDownServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	silent := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), MaxRetries: -1})
	defer silent.Close()
	c, _ := rlprom.NewCollector(ratelimit.New(silent), rlprom.ScrapeTimeout(200*time.Millisecond))
	if got := value(gather(t, c)["ratelimit_up"]); got != 0 {
		t.Fatalf("ratelimit_up %v", got)
	}
	if _, err := rlprom.NewCollector(ratelimit.New(silent), rlprom.TopKeys(101)); err == nil {
		t.Fatal("TopKeys 101 accepted")
	}
}

// Package rlprom is a Prometheus collector (client_golang) for the redis-ratelimit module,
// with the metric names of the Node and Python packages (docs/observability.md):
//
//	c, err := rlprom.NewCollector(ratelimit.New(rdb), rlprom.TopKeys(10))
//	if err != nil {
//		return err
//	}
//	prometheus.MustRegister(c)
//
// (ExampleNewCollector runs it.)
// At each scrape it reads the module's counters (INFO ratelimit: per command, per policy,
// waiting clients, RL.TOP's totals) and, with TopKeys, RL.TOP — one pipelined round trip per
// node (every primary of a cluster or ring) — plus the httplimit middleware's decisions
// counted in this process. Labels stay low-cardinality (command, policy, outcome); keys only
// in the opt-in ratelimit_top_key_refused (at most 100). A scrape that fails, or takes longer
// than the scrape timeout (default 5 s), reports ratelimit_up 0 and the middleware counters.
package rlprom

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/httplimit"
)

// MaxTopKeys is the most keys ratelimit_top_key_refused exposes.
const MaxTopKeys = 100

// DefaultScrapeTimeout bounds a scrape's wait for the servers (below Prometheus' 10 s).
const DefaultScrapeTimeout = 5 * time.Second

// notDeciding: INFO commands whose calls decide nothing (their admitted/limited stay 0).
var notDeciding = map[string]bool{"peek": true, "info": true, "restore": true, "top": true, "refund": true, "release": true, "policy": true}

var (
	policyOutcomes    = []string{"admitted", "limited", "shadow_limited", "near_limit"}
	candidateOutcomes = []string{"admitted", "limited", "near_limit"}
)

// policyLine starts a policy's INFO field: ratelimit_policy_stats_<name>:calls=…,… .
const policyLine = "policy_stats_"

// Option configures a Collector.
type Option func(*Collector)

// TopKeys exposes the n most refused keys (0 … 100, default 0).
func TopKeys(n int) Option { return func(c *Collector) { c.topKeys = n } }

// ScrapeTimeout bounds how long a scrape waits for the servers.
func ScrapeTimeout(d time.Duration) Option { return func(c *Collector) { c.timeout = d } }

// Collector is the prometheus.Collector.
type Collector struct {
	rl      *ratelimit.Client
	topKeys int
	timeout time.Duration

	up, decisions, calls, errs, policyDecisions, candidateDecisions *prometheus.Desc
	waiting, waitAdmitted, waitTimeouts, topRefusals, topErrorBound *prometheus.Desc
	topKey, middleware                                              *prometheus.Desc
}

// NewCollector returns the collector over rl's client.
func NewCollector(rl *ratelimit.Client, opts ...Option) (*Collector, error) {
	c := &Collector{rl: rl, timeout: DefaultScrapeTimeout}
	for _, o := range opts {
		o(c)
	}
	if c.topKeys < 0 || c.topKeys > MaxTopKeys {
		return nil, fmt.Errorf("rlprom: TopKeys must be 0 … %d (got %d)", MaxTopKeys, c.topKeys)
	}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	c.up = d("ratelimit_up", "Whether every node answered the last scrape (1) or not (0)")
	c.decisions = d("ratelimit_decisions_total", "Limiting calls the module decided, by command and outcome (admitted, limited)", "command", "outcome")
	c.calls = d("ratelimit_calls_total", "Calls of each module command, errors included", "command")
	c.errs = d("ratelimit_errors_total", "Calls of each module command answered with an error", "command")
	c.policyDecisions = d("ratelimit_policy_decisions_total", "Decisions per server policy (RL.HIT) by outcome (admitted, limited, shadow_limited, near_limit)", "policy", "outcome")
	c.candidateDecisions = d("ratelimit_policy_candidate_decisions_total", "What a policy's candidate (evaluated in shadow beside it) decided, by outcome (admitted, limited, near_limit)", "policy", "outcome")
	c.waiting = d("ratelimit_waiting", "Clients blocked in WAIT now")
	c.waitAdmitted = d("ratelimit_wait_admitted_total", "Calls admitted after waiting (WAIT)")
	c.waitTimeouts = d("ratelimit_wait_timeouts_total", "Waits (WAIT) that timed out")
	c.topRefusals = d("ratelimit_top_refusals", "Refusals RL.TOP covers now (the last one to two windows)")
	c.topErrorBound = d("ratelimit_top_error_bound", "Every count RL.TOP reports is within this of the true count")
	c.topKey = d("ratelimit_top_key_refused", fmt.Sprintf("Refusals of the %d most refused keys now (RL.TOP)", c.topKeys), "key")
	c.middleware = d("ratelimit_middleware_decisions_total", "This process's httplimit middleware decisions by policy and outcome (admitted, limited, error)", "policy", "outcome")
	return c, nil
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.up, c.decisions, c.calls, c.errs, c.policyDecisions, c.candidateDecisions,
		c.waiting, c.waitAdmitted, c.waitTimeouts, c.topRefusals, c.topErrorBound, c.middleware} {
		ch <- d
	}
	if c.topKeys > 0 {
		ch <- c.topKey
	}
}

// snapshot is every node's counters added up, and the top keys across nodes.
type snapshot struct {
	fields   map[string]float64
	policies map[string]map[string]float64
	top      []ratelimit.TopKey
}

// ParseInfo reads the ratelimit_* fields of an INFO reply: numbers by name (prefix dropped),
// and the policy lines (policy_stats_<name>:calls=…,admitted=…) by policy name.
func ParseInfo(text string) (fields map[string]float64, policies map[string]map[string]float64) {
	fields, policies = map[string]float64{}, map[string]map[string]float64{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimRight(line, "\r")
		rest, ok := strings.CutPrefix(line, "ratelimit_")
		if !ok {
			continue
		}
		colon := strings.LastIndexByte(rest, ':')
		if colon < 0 {
			continue
		}
		name, value := rest[:colon], rest[colon+1:]
		if strings.Contains(value, "=") {
			policy, ok := strings.CutPrefix(name, policyLine)
			if !ok {
				continue
			}
			stats := map[string]float64{}
			for _, pair := range strings.Split(value, ",") {
				k, v, _ := strings.Cut(pair, "=")
				if n, err := strconv.ParseFloat(v, 64); err == nil {
					stats[k] = n
				}
			}
			policies[policy] = stats
		} else if n, err := strconv.ParseInt(value, 10, 64); err == nil {
			fields[name] = float64(n)
		}
	}
	return fields, policies
}

func (c *Collector) scrape(ctx context.Context) (*snapshot, error) {
	s := &snapshot{fields: map[string]float64{}, policies: map[string]map[string]float64{}}
	var mu sync.Mutex
	top := map[string]*ratelimit.TopKey{}
	err := c.rl.EachPrimary(ctx, func(ctx context.Context, node redis.UniversalClient) error {
		pipe := node.Pipeline()
		info := pipe.Info(ctx, "ratelimit")
		var rows *redis.Cmd
		if c.topKeys > 0 {
			rows = pipe.Do(ctx, "RL.TOP", "COUNT", c.topKeys)
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		fields, policies := ParseInfo(info.Val())
		mu.Lock()
		defer mu.Unlock()
		for k, v := range fields {
			s.fields[k] += v
		}
		for name, stats := range policies {
			sum := s.policies[name]
			if sum == nil {
				sum = map[string]float64{}
				s.policies[name] = sum
			}
			for k, v := range stats {
				sum[k] += v
			}
		}
		if rows != nil {
			list, _ := rows.Val().([]any)
			for _, row := range list {
				v, _ := row.([]any)
				if len(v) != 3 {
					continue
				}
				key := fmt.Sprint(v[0])
				n, _ := v[1].(int64)
				t := top[key]
				if t == nil {
					t = &ratelimit.TopKey{Key: key}
					top[key] = t
				}
				t.Refused += n
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, t := range top {
		s.top = append(s.top, *t)
	}
	sort.Slice(s.top, func(i, j int) bool {
		if s.top[i].Refused != s.top[j].Refused {
			return s.top[i].Refused > s.top[j].Refused
		}
		return s.top[i].Key < s.top[j].Key
	})
	if len(s.top) > c.topKeys {
		s.top = s.top[:c.topKeys]
	}
	return s, nil
}

// commands are those INFO counts (with a <cmd>_calls field), sorted.
func commands(fields map[string]float64) []string {
	var out []string
	for k := range fields {
		if cmd, ok := strings.CutSuffix(k, "_calls"); ok {
			out = append(out, cmd)
		}
	}
	sort.Strings(out)
	return out
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, d := range httplimit.DecisionCounts() {
		for i, outcome := range httplimit.Outcomes {
			ch <- prometheus.MustNewConstMetric(c.middleware, prometheus.CounterValue, float64(d.Counts[i]), d.Policy, outcome)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	// The wait is bounded here whatever the client's own timeouts (a scrape still running
	// ends in the background).
	type scraped struct {
		s   *snapshot
		err error
	}
	done := make(chan scraped, 1)
	go func() {
		s, err := c.scrape(ctx)
		done <- scraped{s, err}
	}()
	var s *snapshot
	var err error
	select {
	case r := <-done:
		s, err = r.s, r.err
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, cmd := range commands(s.fields) {
		counter(c.calls, s.fields[cmd+"_calls"], cmd)
		counter(c.errs, s.fields[cmd+"_errors"], cmd)
		if notDeciding[cmd] {
			continue
		}
		for _, outcome := range []string{"admitted", "limited"} {
			counter(c.decisions, s.fields[cmd+"_"+outcome], cmd, outcome)
		}
	}
	names := make([]string, 0, len(s.policies))
	for name := range s.policies {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		stats := s.policies[name]
		for _, outcome := range policyOutcomes {
			counter(c.policyDecisions, stats[outcome], name, outcome)
		}
		if _, ok := stats["candidate_calls"]; ok {
			for _, outcome := range candidateOutcomes {
				counter(c.candidateDecisions, stats["candidate_"+outcome], name, outcome)
			}
		}
	}
	gauge(c.waiting, s.fields["waiting"])
	counter(c.waitAdmitted, s.fields["wait_admitted"])
	counter(c.waitTimeouts, s.fields["wait_timeouts"])
	gauge(c.topRefusals, s.fields["top_refusals"])
	gauge(c.topErrorBound, s.fields["top_error_bound"])
	if c.topKeys > 0 {
		for _, t := range s.top {
			gauge(c.topKey, float64(t.Refused), t.Key)
		}
	}
}

package httplimit

import (
	"sort"
	"sync"
)

// The middleware's decisions, counted in this process (no Redis call): per policy name (its
// RateLimit-Policy name) and outcome — admitted, limited, or error (the decision failed: let
// through with FailOpen, else answered 503). rlprom exposes them as
// ratelimit_middleware_decisions_total{policy, outcome}, as the Node and Python packages do.

const (
	outcomeAdmitted = iota
	outcomeLimited
	outcomeError
)

// Outcomes are the outcome label values, in DecisionCount's order.
var Outcomes = [3]string{"admitted", "limited", "error"}

// DecisionCount is one policy's counts: admitted, limited, error.
type DecisionCount struct {
	Policy string
	Counts [3]uint64
}

var counts = struct {
	sync.Mutex
	m map[string]*[3]uint64
}{m: map[string]*[3]uint64{}}

func count(policy string, outcome int) {
	counts.Lock()
	c := counts.m[policy]
	if c == nil {
		c = new([3]uint64)
		counts.m[policy] = c
	}
	c[outcome]++
	counts.Unlock()
}

// DecisionCounts is a copy of the counts so far, by policy name.
func DecisionCounts() []DecisionCount {
	counts.Lock()
	defer counts.Unlock()
	out := make([]DecisionCount, 0, len(counts.m))
	for p, c := range counts.m {
		out = append(out, DecisionCount{Policy: p, Counts: *c})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Policy < out[j].Policy })
	return out
}

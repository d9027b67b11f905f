package ratelimit

// What a limiting command answers, and the IETF RateLimit header fields of it
// (draft-ietf-httpapi-ratelimit-headers-10), as the Node and Python packages write them.

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Never is Decision.RetryAfter of a request that can never be admitted (its cost is above
// the limit).
const Never time.Duration = -1

// Decision is the module's answer to one request.
type Decision struct {
	// Allowed: the request is admitted (and counted, unless it was a dry run).
	Allowed bool
	// Limit is the configured maximum (a bucket's capacity, a window's limit).
	Limit int64
	// Remaining is the whole permits left after this request, 0 … Limit.
	Remaining int64
	// RetryAfter, refused: how long until the same request would be admitted ([Never] if it
	// never can). Admitted: 0, except a leaky bucket in delay mode, where it is the delay
	// the caller must wait before acting.
	RetryAfter time.Duration
	// ResetAfter is how long until the limiter is back to its initial state.
	ResetAfter time.Duration
	// Taken is the permits an [AtMost] call took (0 when refused); for other calls, the
	// cost when admitted.
	Taken int64
}

// decisionOf reads the five (or six, with ATMOST) integers of a limiting command's reply.
func decisionOf(reply any) (Decision, error) {
	v, ok := reply.([]any)
	if !ok || len(v) < 5 {
		return Decision{}, fmt.Errorf("ratelimit: unexpected reply %v", reply)
	}
	var n [6]int64
	for i := 0; i < len(v) && i < 6; i++ {
		x, ok := v[i].(int64)
		if !ok {
			return Decision{}, fmt.Errorf("ratelimit: unexpected reply %v", reply)
		}
		n[i] = x
	}
	d := Decision{
		Allowed:    n[0] == 1,
		Limit:      n[1],
		Remaining:  n[2],
		RetryAfter: msDuration(n[3]),
		ResetAfter: msDuration(n[4]),
	}
	if len(v) >= 6 {
		d.Taken = n[5]
	}
	return d, nil
}

func msDuration(ms int64) time.Duration {
	if ms < 0 {
		return Never
	}
	return time.Duration(ms) * time.Millisecond
}

// ceilSeconds is a non-negative duration in whole seconds, rounded up.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// sfString is a structured-field string (RFC 8941 §3.3.3): quoted, `\` and `"` escaped.
func sfString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// PolicyHeader is the RateLimit-Policy field value: `"<policy>";q=<limit>[;w=<window in
// seconds, rounded up>]` (w only when window > 0).
func PolicyHeader(policy string, quota int64, window time.Duration) string {
	v := sfString(policy) + ";q=" + strconv.FormatInt(quota, 10)
	if window > 0 {
		v += ";w=" + strconv.FormatInt(ceilSeconds(window), 10)
	}
	return v
}

// Header is the RateLimit field value: `"<policy>";r=<remaining>;t=<seconds until the
// limiter is back to its initial state, rounded up>`.
func (d Decision) Header(policy string) string {
	return sfString(policy) + ";r=" + strconv.FormatInt(d.Remaining, 10) + ";t=" +
		strconv.FormatInt(ceilSeconds(d.ResetAfter), 10)
}

// RetryAfterHeader is the Retry-After value of a refused request that can be retried
// (whole seconds, rounded up), and false for an admitted one or one that never can be.
func (d Decision) RetryAfterHeader() (string, bool) {
	if d.Allowed || d.RetryAfter < 0 {
		return "", false
	}
	return strconv.FormatInt(ceilSeconds(d.RetryAfter), 10), true
}

// WriteHeaders sets RateLimit-Policy (quota = d.Limit, w when window > 0), RateLimit and, on
// a refused request that can be retried, Retry-After.
func (d Decision) WriteHeaders(h http.Header, policy string, window time.Duration) {
	h.Set("RateLimit-Policy", PolicyHeader(policy, d.Limit, window))
	h.Set("RateLimit", d.Header(policy))
	if v, ok := d.RetryAfterHeader(); ok {
		h.Set("Retry-After", v)
	}
}

package ratelimit

import (
	"net/http"
	"testing"
	"time"
)

func TestHeaderValues(t *testing.T) {
	d := Decision{Allowed: false, Limit: 100, Remaining: 0, RetryAfter: 1500 * time.Millisecond, ResetAfter: 16001 * time.Millisecond}
	h := http.Header{}
	d.WriteHeaders(h, `te"am`, time.Minute)
	for k, want := range map[string]string{
		"RateLimit-Policy": `"te\"am";q=100;w=60`,
		"RateLimit":        `"te\"am";r=0;t=17`,
		"Retry-After":      "2",
	} {
		if got := h.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	never := Decision{Limit: 1, RetryAfter: Never}
	if _, ok := never.RetryAfterHeader(); ok {
		t.Error("Retry-After for a request that can never be admitted")
	}
	if got := PolicyHeader("p", 5, 0); got != `"p";q=5` {
		t.Errorf("no window: %q", got)
	}
}

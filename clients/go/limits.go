package ratelimit

// The limits a call sends: one type per algorithm, each knowing its command, its arguments
// and its quota (the RateLimit-Policy header's q and w).

import (
	"fmt"
	"strconv"
	"time"
)

// MaxCount is the largest count the module accepts (capacity, rate, limit, cost): 10^12.
const MaxCount = 1_000_000_000_000

// MaxDuration is the longest period or window the module accepts: ten years (3650 days).
const MaxDuration = 3650 * 24 * time.Hour

// Limit is one limiter's algorithm and parameters: [Token], [Period], [Slide] or [Leaky].
type Limit interface {
	// Command is the module command that judges it (RL.TOKEN, RL.PERIOD, RL.SLIDE, RL.LEAKY).
	Command() string
	// Quota is what the limit allows: q permits per w (w rounded up to whole seconds in the
	// RateLimit-Policy header).
	Quota() (q int64, w time.Duration)
	// appendArgs appends the positional parameters and the algorithm's options.
	appendArgs(args []any) ([]any, error)
	// keyword is the limit's word in RL.ALL groups and RL.POLICY SET (TOKEN, PERIOD, …).
	keyword() string
}

// Token is a token bucket of Capacity tokens refilled with Rate tokens every Period
// (RL.TOKEN); a new bucket starts full. Step refills Rate tokens at once at each period
// boundary instead of continuously.
type Token struct {
	Capacity int64
	Rate     int64
	Period   time.Duration
	Step     bool
}

// Period is a fixed window of at most Limit per Period (RL.PERIOD). Align starts windows at
// calendar boundaries of UTCOffset (0: UTC); KeepPeriod lets a window in force keep its own
// length when a call sends another period.
type Period struct {
	Limit      int64
	Period     time.Duration
	Align      bool
	UTCOffset  time.Duration
	KeepPeriod bool
}

// Slide is a sliding window of at most Limit in any Window (RL.SLIDE): an exact log, or
// Buckets counters (then Anchor and Floor as in docs/commands.md).
type Slide struct {
	Limit   int64
	Window  time.Duration
	Buckets int64
	Anchor  bool
	Floor   bool
}

// Leaky is a leaky bucket of Capacity draining Rate every Period (RL.LEAKY): in delay mode
// (the default) an admitted request is told how long to wait (Decision.RetryAfter); NoDelay
// makes it a meter; Delay (with HasDelay) tolerates that much water ahead without delay.
type Leaky struct {
	Capacity int64
	Rate     int64
	Period   time.Duration
	NoDelay  bool
	Delay    int64
	HasDelay bool
}

// Command implements [Limit].
func (Token) Command() string { return "RL.TOKEN" }

// Command implements [Limit].
func (Period) Command() string { return "RL.PERIOD" }

// Command implements [Limit].
func (Slide) Command() string { return "RL.SLIDE" }

// Command implements [Limit].
func (Leaky) Command() string { return "RL.LEAKY" }

func (Token) keyword() string  { return "TOKEN" }
func (Period) keyword() string { return "PERIOD" }
func (Slide) keyword() string  { return "SLIDE" }
func (Leaky) keyword() string  { return "LEAKY" }

// Quota implements [Limit]: a full bucket refills in Capacity × Period / Rate.
func (t Token) Quota() (int64, time.Duration) {
	return t.Capacity, bucketWindow(t.Capacity, t.Rate, t.Period)
}

// Quota implements [Limit].
func (p Period) Quota() (int64, time.Duration) { return p.Limit, p.Period }

// Quota implements [Limit].
func (s Slide) Quota() (int64, time.Duration) { return s.Limit, s.Window }

// Quota implements [Limit]: a full bucket drains in Capacity × Period / Rate.
func (l Leaky) Quota() (int64, time.Duration) {
	return l.Capacity, bucketWindow(l.Capacity, l.Rate, l.Period)
}

func bucketWindow(capacity, rate int64, period time.Duration) time.Duration {
	if rate <= 0 {
		return 0
	}
	ms := float64(capacity) * float64(period.Milliseconds()) / float64(rate)
	return time.Duration(ms * float64(time.Millisecond))
}

// LimitArgs are the arguments a limit's command takes after the key (its parameters and
// algorithm options, durations in ms), as strings; an error for parameters out of range.
func LimitArgs(limit Limit) ([]string, error) {
	args, err := limit.appendArgs(nil)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = fmt.Sprint(a)
	}
	return out, nil
}

func (t Token) appendArgs(args []any) ([]any, error) {
	args, err := bucketArgs(args, t.Capacity, t.Rate, t.Period)
	if err != nil {
		return nil, err
	}
	if t.Step {
		args = append(args, "STEP")
	}
	return args, nil
}

func (p Period) appendArgs(args []any) ([]any, error) {
	limit, err := count("limit", p.Limit, 1)
	if err != nil {
		return nil, err
	}
	period, err := durationMs("period", p.Period)
	if err != nil {
		return nil, err
	}
	args = append(args, limit, period)
	if p.Align {
		if p.UTCOffset%time.Millisecond != 0 {
			return nil, fmt.Errorf("ratelimit: UTCOffset must be whole milliseconds (got %v)", p.UTCOffset)
		}
		args = append(args, "ALIGN")
		if p.UTCOffset != 0 {
			args = append(args, strconv.FormatInt(p.UTCOffset.Milliseconds(), 10))
		}
	}
	if p.KeepPeriod {
		args = append(args, "KEEPPERIOD")
	}
	return args, nil
}

func (s Slide) appendArgs(args []any) ([]any, error) {
	limit, err := count("limit", s.Limit, 1)
	if err != nil {
		return nil, err
	}
	window, err := durationMs("window", s.Window)
	if err != nil {
		return nil, err
	}
	args = append(args, limit, window)
	if s.Buckets != 0 {
		b, err := count("buckets", s.Buckets, 1)
		if err != nil {
			return nil, err
		}
		args = append(args, "BUCKETS", b)
	}
	if s.Anchor {
		args = append(args, "ANCHOR")
	}
	if s.Floor {
		args = append(args, "FLOOR")
	}
	return args, nil
}

func (l Leaky) appendArgs(args []any) ([]any, error) {
	args, err := bucketArgs(args, l.Capacity, l.Rate, l.Period)
	if err != nil {
		return nil, err
	}
	if l.NoDelay {
		args = append(args, "NODELAY")
	}
	if l.HasDelay {
		d, err := count("delay", l.Delay, 0)
		if err != nil {
			return nil, err
		}
		args = append(args, "DELAY", d)
	}
	return args, nil
}

func bucketArgs(args []any, capacity, rate int64, period time.Duration) ([]any, error) {
	c, err := count("capacity", capacity, 1)
	if err != nil {
		return nil, err
	}
	r, err := count("rate", rate, 1)
	if err != nil {
		return nil, err
	}
	p, err := durationMs("period", period)
	if err != nil {
		return nil, err
	}
	return append(args, c, r, p), nil
}

// count checks a count argument (min … 10^12) and formats it.
func count(name string, v, min int64) (string, error) {
	if v < min || v > MaxCount {
		return "", fmt.Errorf("ratelimit: %s must be an integer between %d and %d (got %d)", name, min, int64(MaxCount), v)
	}
	return strconv.FormatInt(v, 10), nil
}

// durationMs checks a period or window (1 ms … 10 years, whole ms) and formats it in ms.
func durationMs(name string, d time.Duration) (string, error) {
	if d < time.Millisecond || d > MaxDuration || d%time.Millisecond != 0 {
		return "", fmt.Errorf("ratelimit: %s must be whole milliseconds between 1ms and 3650 days (got %v)", name, d)
	}
	return strconv.FormatInt(d.Milliseconds(), 10), nil
}

// timeoutMs checks a timeout (0 … 10 years; rounded up to whole ms) and formats it in ms.
func timeoutMs(name string, d time.Duration) (string, error) {
	if d < 0 || d > MaxDuration {
		return "", fmt.Errorf("ratelimit: %s must be between 0 and 3650 days (got %v)", name, d)
	}
	return strconv.FormatInt(ceilMs(d), 10), nil
}

func ceilMs(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

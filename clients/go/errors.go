package ratelimit

// Errors: the server's own, wrapped with their code; the module missing; the deadline.

import (
	"context"
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
)

// ErrModuleNotLoaded means the server does not know the module's commands.
var ErrModuleNotLoaded = errors.New("redis-ratelimit: the module is not loaded on the server " +
	"(loadmodule /path/to/libredis_ratelimit.so in redis.conf, or MODULE LOAD; build it with " +
	"`make build`: target/release/libredis_ratelimit.so)")

// ErrDeadline means the call reached the server after the deadline its context carried, and
// nothing was counted. errors.Is(err, context.DeadlineExceeded) holds for it too.
var ErrDeadline = errors.New("redis-ratelimit: the caller's deadline passed before the server judged the call; nothing was counted")

// ServerError is an error reply of the server: Code is its first word (ERR, WRONGTYPE, …),
// Message the whole text; it wraps go-redis' own error.
type ServerError struct {
	Code    string
	Message string
	Command string
	err     error
}

func (e *ServerError) Error() string { return "redis-ratelimit: " + e.Command + ": " + e.Message }

// Unwrap gives go-redis' error (and, for a module missing, [ErrModuleNotLoaded]; for a
// deadline, [ErrDeadline] and [context.DeadlineExceeded]).
func (e *ServerError) Unwrap() []error {
	errs := []error{e.err}
	switch {
	case e.Code == "DEADLINE":
		errs = append(errs, ErrDeadline, context.DeadlineExceeded)
	case isUnknownCommand(e.Message):
		errs = append(errs, ErrModuleNotLoaded)
	}
	return errs
}

func isUnknownCommand(msg string) bool {
	m := strings.ToLower(msg)
	return strings.HasPrefix(m, "err unknown command") &&
		(strings.Contains(m, "'rl.") || strings.Contains(m, "'cl.throttle") || strings.Contains(m, "`rl.") || strings.Contains(m, "`cl.throttle"))
}

// translate wraps a server error reply; other errors (network, context) pass unchanged.
func translate(command string, err error) error {
	if err == nil || errors.Is(err, redis.Nil) {
		return err
	}
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return err
	}
	msg := rerr.Error()
	code := msg
	if i := strings.IndexByte(msg, ' '); i >= 0 {
		code = msg[:i]
	}
	return &ServerError{Code: code, Message: msg, Command: command, err: err}
}

// isUnknownDeadline: the module predates DEADLINE.
func isUnknownDeadline(err error) bool {
	var se *ServerError
	return errors.As(err, &se) && strings.Contains(se.Message, "unknown option 'DEADLINE'")
}

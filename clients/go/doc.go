// Package ratelimit is the Go client of the redis-ratelimit module: native, atomic,
// integer-exact rate limiting in Redis and Valkey, one module command per decision, no Lua.
//
// The package name is ratelimit (its path ends in /go): import it as
//
//	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
//
// Install it from the release's redis-ratelimit-go-<version>.tar.gz with a replace directive
// (README "Install"), and load the module into the server (`loadmodule
// /path/to/libredis_ratelimit.so`). The client works over any go-redis v9 client ([redis.UniversalClient]: a single node, a
// cluster, a ring or a sentinel-backed failover client); the caller owns it.
//
//	rl := ratelimit.New(rdb)
//	d, err := rl.Limit(ctx, "api:key42", ratelimit.Token{Capacity: 100, Rate: 10, Period: time.Second})
//	if err == nil && !d.Allowed {
//		// refused: retry after d.RetryAfter
//	}
//
// Terms:
//   - a decision ([Decision]) is the module's five-integer reply with names: allowed, limit,
//     remaining, retry after, reset after;
//   - a limit ([Token], [Period], [Slide], [Leaky]) is an algorithm and its parameters, sent
//     with every call (the server stores the parameters of the last admitted call);
//   - a policy is a limit the server holds by name (RL.POLICY), judged with [Client.Hit];
//   - the deadline: when the call's context has one, limiting calls carry `DEADLINE <unix ms>`,
//     so a call that reaches the server after its caller gave up counts nothing
//     ([ErrDeadline]).
//
// The drop-ins live in subpackages: [github.com/redis-ratelimit/redis-ratelimit/clients/go/redisrate]
// (go-redis/redis_rate v10), [github.com/redis-ratelimit/redis-ratelimit/clients/go/limiterstore]
// (ulule/limiter v3's store) and [github.com/redis-ratelimit/redis-ratelimit/clients/go/gozero]
// (go-zero's PeriodLimit and TokenLimiter); net/http middleware in
// [github.com/redis-ratelimit/redis-ratelimit/clients/go/httplimit], Prometheus metrics in
// [github.com/redis-ratelimit/redis-ratelimit/clients/go/rlprom].
package ratelimit

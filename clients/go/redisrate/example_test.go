package redisrate_test

import (
	"context"
	"fmt"
	"os"

	"github.com/redis/go-redis/v9"

	redis_rate "github.com/redis-ratelimit/redis-ratelimit/clients/go/redisrate"
)

func ExampleNewLimiter() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	limiter := redis_rate.NewLimiter(rdb)
	_ = limiter.Reset(ctx, "project:123")
	res, err := limiter.Allow(ctx, "project:123", redis_rate.PerSecond(10))
	if err != nil {
		panic(err)
	}
	fmt.Println("allowed", res.Allowed, "remaining", res.Remaining)
	// Output: allowed 1 remaining 9
}

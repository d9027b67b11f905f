package limiterstore_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/ulule/limiter/v3"

	sredis "github.com/redis-ratelimit/redis-ratelimit/clients/go/limiterstore"
)

func ExampleNewStoreWithOptions() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	_ = rdb.Del(ctx, "example:203.0.113.7").Err()

	store, err := sredis.NewStoreWithOptions(rdb, limiter.StoreOptions{Prefix: "example"})
	if err != nil {
		panic(err)
	}
	l := limiter.New(store, limiter.Rate{Period: time.Hour, Limit: 2})
	for i := 0; i < 3; i++ {
		c, _ := l.Get(ctx, "203.0.113.7")
		fmt.Println(c.Limit, c.Remaining, c.Reached)
	}
	// Output:
	// 2 1 false
	// 2 0 false
	// 2 0 true
}

package ratelimit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
)

// exampleAddr is the test server's address (set by TestMain in the internal tests).
func exampleClient() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: ratelimit.ServerAddrForTests()})
}

func ExampleClient_Limit() {
	ctx := context.Background()
	rdb := exampleClient()
	defer rdb.Close()
	_ = rdb.Del(ctx, "api:key42").Err()

	rl := ratelimit.New(rdb)
	limit := ratelimit.Token{Capacity: 2, Rate: 1, Period: time.Second} // bursts of 2, 1/s
	for i := 0; i < 3; i++ {
		d, err := rl.Limit(ctx, "api:key42", limit)
		if err != nil {
			panic(err)
		}
		fmt.Println(d.Allowed, d.Remaining, d.RetryAfter > 0)
	}
	// Output:
	// true 1 false
	// true 0 false
	// false 0 true
}

func ExampleAtMost() {
	ctx := context.Background()
	rdb := exampleClient()
	defer rdb.Close()
	_ = rdb.Del(ctx, "batch:u7").Err()

	rl := ratelimit.New(rdb)
	limit := ratelimit.Period{Limit: 10, Period: time.Minute}
	d, _ := rl.Limit(ctx, "batch:u7", limit, ratelimit.AtMost(25)) // a batch of 25: take what is left
	fmt.Println(d.Allowed, d.Taken, d.Remaining)
	// Output: true 10 0
}

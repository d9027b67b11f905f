package ratelimit_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
)

func ExampleClient_Limit() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
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
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	_ = rdb.Del(ctx, "batch:u7").Err()

	rl := ratelimit.New(rdb)
	limit := ratelimit.Period{Limit: 10, Period: time.Minute}
	d, _ := rl.Limit(ctx, "batch:u7", limit, ratelimit.AtMost(25)) // a batch of 25: take what is left
	fmt.Println(d.Allowed, d.Taken, d.Remaining)
	// Output: true 10 0
}

func ExampleClient_All() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	_ = rdb.Del(ctx, "{user42}:s", "{user42}:d").Err()

	rl := ratelimit.New(rdb)
	// 2 per second and 3 per day, all or nothing: one hash tag, so one slot on a cluster.
	groups := []ratelimit.Group{
		{Key: "{user42}:s", Limit: ratelimit.Token{Capacity: 2, Rate: 2, Period: time.Second}},
		{Key: "{user42}:d", Limit: ratelimit.Period{Limit: 3, Period: 24 * time.Hour}},
	}
	for i := 0; i < 3; i++ {
		d, err := rl.All(ctx, groups)
		if err != nil {
			panic(err)
		}
		if d.Allowed {
			fmt.Println("admitted")
		} else {
			fmt.Println("refused by", groups[d.Index].Key) // nothing counted on either key
		}
	}
	// Output:
	// admitted
	// admitted
	// refused by {user42}:s
}

func ExampleClient_Hit() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	_ = rdb.Del(ctx, "tenant:t1").Err()

	rl := ratelimit.New(rdb)
	// The server holds the limit by name; every service judges keys under it.
	if err := rl.SetPolicy(ctx, "free", ratelimit.Period{Limit: 2, Period: time.Minute}); err != nil {
		panic(err)
	}
	for i := 0; i < 3; i++ {
		d, err := rl.Hit(ctx, "free", "tenant:t1")
		if err != nil {
			panic(err)
		}
		fmt.Println(d.Allowed, d.Remaining)
	}
	// Output:
	// true 1
	// true 0
	// false 0
}

func ExampleNewPermitBlock() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	_ = rdb.Del(ctx, "global:api").Err()

	rl := ratelimit.New(rdb)
	// A hot key's permits, 10 per server call, handed out in this process.
	pb, err := ratelimit.NewPermitBlock(rl, "global:api", ratelimit.Token{Capacity: 1000, Rate: 1000, Period: time.Second}, 10)
	if err != nil {
		panic(err)
	}
	for i := 0; i < 25; i++ {
		if d, err := pb.Take(ctx); err != nil || !d.Allowed {
			panic(fmt.Sprint(d, err))
		}
	}
	fmt.Println("server calls:", pb.Stats().Calls)
	if err := pb.Close(ctx); err != nil { // the 5 unused permits go back
		panic(err)
	}
	fmt.Println("refunded:", pb.Stats().Refunded)
	// Output:
	// server calls: 3
	// refunded: 5
}

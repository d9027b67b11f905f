package gozero_test

import (
	"context"
	"fmt"
	"os"

	"github.com/redis/go-redis/v9"

	limit "github.com/redis-ratelimit/redis-ratelimit/clients/go/gozero"
)

func ExampleNewPeriodLimit() {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	_ = rdb.Del(context.Background(), "sms:+15551234").Err()

	// 2 verification messages per phone number per day, per local calendar day.
	l := limit.NewPeriodLimit(86400, 2, rdb, "sms:", limit.Align())
	for i := 0; i < 3; i++ {
		code, err := l.Take("+15551234")
		if err != nil {
			panic(err)
		}
		fmt.Println(code == limit.Allowed, code == limit.HitQuota, code == limit.OverQuota)
	}
	// Output:
	// true false false
	// false true false
	// false false true
}

func ExampleNewTokenLimiter() {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	_ = rdb.Del(context.Background(), "{api}.bucket").Err()

	// 10 per second, bursts of 2.
	l := limit.NewTokenLimiter(10, 2, rdb, "api")
	fmt.Println(l.Allow(), l.Allow(), l.Allow())
	// Output: true true false
}

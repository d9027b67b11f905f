package rlprom_test

import (
	"fmt"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/rlprom"
)

func ExampleNewCollector() {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()

	c, err := rlprom.NewCollector(ratelimit.New(rdb), rlprom.TopKeys(10))
	if err != nil {
		panic(err)
	}
	reg := prometheus.NewRegistry() // or prometheus.MustRegister(c): the default registry
	reg.MustRegister(c)

	families, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, f := range families {
		if f.GetName() == "ratelimit_up" {
			fmt.Println("ratelimit_up", f.GetMetric()[0].GetGauge().GetValue())
		}
	}
	// Output: ratelimit_up 1
}

package httplimit_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/httplimit"
)

func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	prefix := "example:"
	limiter, err := httplimit.New(httplimit.Options{
		Redis:  rdb,
		Prefix: &prefix,
		Limit:  ratelimit.Period{Limit: 2, Period: time.Minute},
		Policy: "per-minute",
	})
	if err != nil {
		panic(err)
	}
	_ = rdb.Del(context.Background(), "example:192.0.2.1").Err()
	mux := http.NewServeMux()
	mux.Handle("/api/", limiter.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	})))
	for i := 0; i < 3; i++ {
		r := httptest.NewRequest(http.MethodGet, "/api/x", nil) // RemoteAddr 192.0.2.1:1234
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		fmt.Println(w.Code, w.Header().Get("RateLimit-Policy"), w.Header().Get("RateLimit"))
	}
	// Output:
	// 200 "per-minute";q=2;w=60 "per-minute";r=1;t=60
	// 200 "per-minute";q=2;w=60 "per-minute";r=0;t=60
	// 429 "per-minute";q=2;w=60 "per-minute";r=0;t=60
}

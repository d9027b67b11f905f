// envoy-grpc-load: -c callers sending ShouldRateLimit (domain "bench", descriptor d1 = one of
// 10 000 users) for -d seconds over one Go gRPC connection (grpc-go's client, the load shape
// of issue 40); prints requests, errors, req/s, p50 and p99. It needs envoyproxy/ratelimit's
// dependencies (grpc-go, go-control-plane): build it inside the kit's copy of their module,
// e.g. cp -r bench/envoy-grpc-load $RL_WORK/ratelimit/ && (cd $RL_WORK/ratelimit && go build
// -o /tmp/envoy-grpc-load ./envoy-grpc-load).
package main

import (
	"context"
	"flag"
	"fmt"
	"sort"
	"sync"
	"time"

	pb_struct "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8081", "")
	callers := flag.Int("c", 32, "")
	secs := flag.Float64("d", 5, "")
	flag.Parse()
	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	client := pb.NewRateLimitServiceClient(conn)
	deadline := time.Now().Add(time.Duration(*secs * float64(time.Second)))
	var mu sync.Mutex
	var all []time.Duration
	errs := 0
	var wg sync.WaitGroup
	for c := 0; c < *callers; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			var mine []time.Duration
			e := 0
			for i := 0; time.Now().Before(deadline); i++ {
				req := &pb.RateLimitRequest{Domain: "bench", Descriptors: []*pb_struct.RateLimitDescriptor{
					{Entries: []*pb_struct.RateLimitDescriptor_Entry{{Key: "d1", Value: fmt.Sprintf("u%d", (c*7919+i)%10000)}}},
				}}
				t := time.Now()
				_, err := client.ShouldRateLimit(context.Background(), req)
				mine = append(mine, time.Since(t))
				if err != nil {
					e++
				}
			}
			mu.Lock()
			all = append(all, mine...)
			errs += e
			mu.Unlock()
		}(c)
	}
	wg.Wait()
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	p := func(q float64) float64 { return float64(all[int(q*float64(len(all)-1))].Microseconds()) / 1000 }
	fmt.Printf("requests %d errors %d req/s %.0f p50 %.2f ms p99 %.2f ms\n", len(all), errs, float64(len(all))/(*secs), p(0.5), p(0.99))
}

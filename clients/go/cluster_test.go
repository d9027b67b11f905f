package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/testserver"
)

// startCluster starts a 3-master Redis Cluster on loopback (slots split in three), each node
// with the module; stopped when the test ends.
func startCluster(t *testing.T) []*testserver.Server {
	t.Helper()
	ctx := context.Background()
	var nodes []*testserver.Server
	t.Cleanup(func() {
		for _, n := range nodes {
			n.Stop()
		}
	})
	for i := 0; i < 3; i++ {
		n, err := testserver.Start("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "3000")
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	ranges := [][2]int{{0, 5460}, {5461, 10922}, {10923, 16383}}
	for i, n := range nodes {
		c := n.Client()
		if err := c.ClusterAddSlotsRange(ctx, ranges[i][0], ranges[i][1]).Err(); err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			host, port, _ := strings.Cut(n.Addr, ":")
			if err := nodes[0].Client().ClusterMeet(ctx, host, port).Err(); err != nil {
				t.Fatal(err)
			}
		}
		c.Close()
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range nodes {
		c := n.Client()
		for {
			info, _ := c.ClusterInfo(ctx).Result()
			if strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:3") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("cluster not ok: %s", info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		c.Close()
	}
	return nodes
}

// On a cluster every call goes to the node that owns its key (no MOVED redirect on any node),
// RL.ALL takes one hash tag (CROSSSLOT otherwise), policies are set on every primary and
// RL.TOP is read from all of them.
func TestClusterRoutesByKey(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	ctx := context.Background()
	nodes := startCluster(t)
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.Addr)
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	defer cc.Close()
	if err := cc.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error { return n.Ping(ctx).Err() }); err != nil {
		t.Fatal(err)
	}
	c := New(cc)
	const keys = 300
	for i := 0; i < keys; i++ {
		d, err := c.Limit(ctx, fmt.Sprintf("user:%d", i), Token{Capacity: 5, Rate: 1, Period: time.Second})
		if err != nil || !d.Allowed {
			t.Fatalf("key %d: %+v %v", i, d, err)
		}
	}
	total := 0
	for _, n := range nodes {
		nc := n.Client()
		size, _ := nc.DBSize(ctx).Result()
		total += int(size)
		errs, _ := nc.Info(ctx, "errorstats").Result()
		if strings.Contains(errs, "errorstat_MOVED") || strings.Contains(errs, "errorstat_ASK") {
			t.Errorf("node %s redirected calls: %s", n.Addr, errs)
		}
		stats, _ := nc.Info(ctx, "commandstats").Result()
		if !strings.Contains(stats, fmt.Sprintf("cmdstat_rl.token:calls=%d,", size)) {
			t.Errorf("node %s holds %d keys: %s", n.Addr, size, stats)
		}
		nc.Close()
	}
	if total != keys {
		t.Fatalf("%d keys on the nodes, want %d", total, keys)
	}
	// RL.ALL: one slot by hash tag; keys of different slots are the server's CROSSSLOT.
	groups := []Group{
		{Key: "{u42}:s", Limit: Token{Capacity: 10, Rate: 1, Period: time.Second}},
		{Key: "{u42}:d", Limit: Period{Limit: 100, Period: time.Hour}},
	}
	if d, err := c.All(ctx, groups); err != nil || !d.Allowed {
		t.Fatalf("RL.ALL %+v %v", d, err)
	}
	groups[1].Key = "other:d"
	var se *ServerError
	if _, err := c.All(ctx, groups); !errors.As(err, &se) || se.Code != "CROSSSLOT" {
		t.Fatalf("keys of two slots: %v", err)
	}
	// Policies on every primary; RL.HIT on keys of every node; RL.TOP over all of them.
	if err := c.SetPolicy(ctx, "free", Period{Limit: 1, Period: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := c.ResetTop(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 30; i++ {
		key := fmt.Sprintf("ratelimit:t%d", i)
		for j := 0; j < 2; j++ {
			d, err := c.Hit(ctx, "free", key)
			if err != nil || d.Allowed != (j == 0) {
				t.Fatalf("%s hit %d: %+v %v", key, j, d, err)
			}
		}
	}
	stats, err := c.PolicyStats(ctx, "free")
	if err != nil || stats["calls"] != 60 || stats["limited"] != 30 {
		t.Fatalf("stats summed over the primaries: %v %v", stats, err)
	}
	top, err := c.Top(ctx, 100, "free")
	if err != nil || len(top) != 30 {
		t.Fatalf("top %d rows %v", len(top), err)
	}
	names, _ := c.PolicyNames(ctx)
	if strings.Join(names, ",") != "free" {
		t.Fatalf("names %v", names)
	}
}

package ratelimit

// Install from the release (issue 39): the Go module as `make dist` ships it,
// dist/redis-ratelimit-go-<version>.tar.gz, installed into a fresh Go project in a temporary
// directory outside the repository exactly as README.md "Install" says (unpack, a replace
// directive, GOFLAGS=-mod=mod go mod tidy: go.sum through the module proxy), then a program
// using the typed client and two drop-ins runs against a real server.

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const modulePath = "github.com/redis-ratelimit/redis-ratelimit/clients/go"

const installedProgram = `package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/ulule/limiter/v3"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/limiterstore"
	redis_rate "github.com/redis-ratelimit/redis-ratelimit/clients/go/redisrate"
)

func main() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	rl := ratelimit.New(rdb)
	d, err := rl.Limit(ctx, "install:typed", ratelimit.Token{Capacity: 2, Rate: 1, Period: time.Minute})
	if err != nil {
		panic(err)
	}
	res, err := redis_rate.NewLimiter(rdb).Allow(ctx, "install:rate", redis_rate.PerMinute(10))
	if err != nil {
		panic(err)
	}
	store, err := limiterstore.NewStore(rdb)
	if err != nil {
		panic(err)
	}
	lctx, err := limiter.New(store, limiter.Rate{Limit: 5, Period: time.Minute}).Get(ctx, "install:ulule")
	if err != nil {
		panic(err)
	}
	fmt.Println(d.Allowed, d.Remaining, res.Allowed, res.Remaining, lctx.Remaining)
}
`

func TestInstallFromReleaseArtifact(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a project outside the repository")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go on PATH")
	}
	here, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	newClient(t) // a flushed server
	tmp := t.TempDir()
	if strings.HasPrefix(tmp, filepath.Dir(filepath.Dir(here))) {
		t.Fatalf("the temporary directory %s is inside the repository", tmp)
	}
	run := func(dir string, env []string, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), append([]string{"GOWORK=off", "GOFLAGS=-mod=mod"}, env...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}

	// make dist's step for the Go module.
	out := run(here, []string{"DIST_DIR=" + filepath.Join(tmp, "dist")}, "bash", "dist.sh")
	tarball := out[strings.LastIndex(out, "\n")+1:]
	m := regexp.MustCompile(`/redis-ratelimit-go-(\d+\.\d+\.\d+[^/]*)\.tar\.gz$`).FindStringSubmatch(tarball)
	if m == nil {
		t.Fatalf("artifact %q is not redis-ratelimit-go-<version>.tar.gz", tarball)
	}
	version := m[1]
	if _, err := os.Stat(tarball + ".sha256"); err != nil {
		t.Fatal(err)
	}

	// README "Install", in a new project: the same commands, for this version.
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"tar -xzf redis-ratelimit-go-" + version + ".tar.gz -C third_party",
		"-require=" + modulePath + "@v" + version,
		"-replace=" + modulePath + "=./third_party/redis-ratelimit-go-" + version,
		"GOFLAGS=-mod=mod go mod tidy",
	} {
		if !strings.Contains(string(readme), line) {
			t.Fatalf("README.md \"Install\" does not say %q", line)
		}
	}
	app := filepath.Join(tmp, "app")
	if err := os.MkdirAll(filepath.Join(app, "third_party"), 0o755); err != nil {
		t.Fatal(err)
	}
	run(app, nil, goBin, "mod", "init", "example.com/app")
	if err := os.WriteFile(filepath.Join(app, "main.go"), []byte(installedProgram), 0o644); err != nil {
		t.Fatal(err)
	}
	run(app, nil, "tar", "-xzf", tarball, "-C", "third_party")
	run(app, nil, goBin, "mod", "edit",
		"-require="+modulePath+"@v"+version,
		"-replace="+modulePath+"=./third_party/redis-ratelimit-go-"+version)
	run(app, nil, goBin, "mod", "tidy")
	run(app, nil, goBin, "vet", ".")
	got := run(app, []string{"REDIS_ADDR=" + addr}, goBin, "run", ".")
	if got != "true 1 1 9 4" {
		t.Fatalf("the installed program printed %q, want %q", got, "true 1 1 9 4")
	}
	// The project builds from its own files: nothing points back into the repository.
	mod, _ := os.ReadFile(filepath.Join(app, "go.mod"))
	if strings.Contains(string(mod), filepath.Dir(filepath.Dir(here))) {
		t.Fatalf("go.mod refers to the repository:\n%s", mod)
	}
}

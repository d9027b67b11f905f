# clients/go: the Go module (github.com/redis-ratelimit/redis-ratelimit/clients/go). Included by
# the top Makefile.
#   make go-test      go vet, staticcheck and go test -race ./... (each test package starts its
#                     own server on a free port with target/release/libredis_ratelimit.so), and
#                     the host-fidelity tests (clients/go/bench: stock library and drop-in side
#                     by side; their own module, which requires the host libraries)
#   make go-compat    redis_rate v10's rate_test.go and ulule/limiter v3's store_test.go through
#                     the drop-ins (clients/go/compat/run.sh), then the package's own tests, on
#                     every compat server
#   make go-dist      the module as a release artifact, dist/redis-ratelimit-go-<version>.tar.gz
#                     (clients/go/dist.sh; README "Install"; part of make dist)
#   make bench-go     server time per decision and decisions/s against the host libraries' Lua:
#                     bench/CLIENTS.md "## Go"
GO_PKG         := clients/go
GO             ?= go
GO_BIN         := $(CURDIR)/target/go-bin
STATICCHECK    := honnef.co/go/tools/cmd/staticcheck@v0.8.2
GO_REDIS_RATE  := v10.0.1
GO_ULULE       := v3.11.2
GO_GOZERO      := v1.10.3

CLIENT_TESTS  += go-test
CLIENT_DEPS   += go-deps
CLIENT_COMPAT_EARLY += go-compat
CLIENT_BENCH  += bench-go

.PHONY: go-deps go-test go-compat go-dist bench-go

## go-deps: the module's dependencies (Go module proxy) and staticcheck in target/go-bin
go-deps:
	@command -v $(GO) >/dev/null 2>&1 || { echo "go-deps: Go (>= 1.22) is needed: https://go.dev/dl/" >&2; exit 1; }
	cd $(GO_PKG) && $(GO) mod download
	cd $(GO_PKG)/bench && $(GO) mod download
	@[ -x $(GO_BIN)/staticcheck ] || GOBIN=$(GO_BIN) $(GO) install $(STATICCHECK)

go-test: build go-deps
	cd $(GO_PKG) && $(GO) vet ./...
	cd $(GO_PKG) && $(GO_BIN)/staticcheck ./...
	@cd $(GO_PKG) && unformatted=$$(gofmt -l .) && [ -z "$$unformatted" ] || { echo "gofmt: $$unformatted" >&2; exit 1; }
	cd $(GO_PKG) && RL_MODULE=$(CURDIR)/$(MODULE) $(GO) test -race -count=1 ./...
	cd $(GO_PKG)/bench && $(GO) vet . && $(GO_BIN)/staticcheck . && \
	  RL_MODULE=$(CURDIR)/$(MODULE) $(GO) test -race -count=1 .

## go-compat: the host suites, then the package's own tests, on each compat server under
## target/servers (make compat builds them), else on Debian's redis-server
go-compat: build go-deps
	@servers=""; for s in $(COMPAT_SERVER_BINS); do [ -x "$$s" ] && servers="$$servers $(CURDIR)/$$s"; done; \
	  [ -n "$$servers" ] || servers=redis-server; \
	  COMPAT_SERVERS="$$servers" RL_MODULE=$(CURDIR)/$(MODULE) REDIS_RATE_VERSION=$(GO_REDIS_RATE) \
	    ULULE_VERSION=$(GO_ULULE) bash $(GO_PKG)/compat/run.sh && \
	  for s in $$servers; do echo "=== clients/go tests on $$s ==="; \
	    (cd $(GO_PKG) && RL_SERVER=$$s RL_MODULE=$(CURDIR)/$(MODULE) $(GO) test -count=1 ./...) || exit 1; done

bench-go: build go-deps
	cd $(GO_PKG)/bench && RL_MODULE=$(CURDIR)/$(MODULE) $(GO) run . --write $(CURDIR)/bench/CLIENTS.md

## go-dist: the Go module's sources as dist/redis-ratelimit-go-<version>.tar.gz (DIST_DIR= elsewhere)
go-dist:
	bash $(GO_PKG)/dist.sh

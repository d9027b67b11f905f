# clients/node: the Node package (redis-ratelimit on npm). Included by the top Makefile.
#   make node-test           the package's own tests (node --test) against servers they start
#   make node-compat         rate-limiter-flexible, @nest-lab/throttler-storage-redis and
#                            express-rate-limit's own suites through the package (../shared/peers)
#   make node-test-servers   the package's tests on the compat servers (scripts/servers.sh)
#   make bench-clients-node  one Express app, six limiters, autocannon: bench/CLIENTS.md "## Node"
#   make bench-blocks        PermitBlock on one hot key, 8 processes, block sizes 1/10/100:
#                            bench/CLIENTS.md "## Permit blocks" (BLOCKS_SECONDS per size, default 3)
#   make node-dist           the npm package, dist/redis-ratelimit-<version>.tgz (npm pack): what
#                            the README installs (npm install ./redis-ratelimit-<version>.tgz)
NODE_PKG := clients/node

CLIENT_TESTS  += node-test
CLIENT_DEPS   += node-deps
CLIENT_COMPAT += node-compat
CLIENT_COMPAT_EARLY += node-test-servers
CLIENT_BENCH  += bench-clients-node bench-blocks

.PHONY: node-deps node-test node-test-servers node-compat bench-clients-node bench-blocks node-dist

## node-deps: node + npm (Debian's, when missing) and the package's pinned dev dependencies (npm ci)
node-deps: deps
	@command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || { \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	  $(SUDO) apt-get install -y -qq --no-install-recommends nodejs npm; }
	@if [ ! -f $(NODE_PKG)/node_modules/.package-lock.json ] || \
	   [ $(NODE_PKG)/package-lock.json -nt $(NODE_PKG)/node_modules/.package-lock.json ]; then \
	  cd $(NODE_PKG) && npm ci --no-audit --no-fund --loglevel=error; fi

## node-dist: npm pack into $(NODE_DIST_DIR) (default dist/); prints the tarball's path. No
## dependencies needed: the package has no build step (lib/ is the source).
NODE_DIST_DIR ?= dist
node-dist:
	@command -v npm >/dev/null 2>&1 || { echo "node-dist: npm not found (make node-deps installs it)" >&2; exit 1; }
	@mkdir -p $(NODE_DIST_DIR)
	@d=$$(cd $(NODE_DIST_DIR) && pwd); f=$$(cd $(NODE_PKG) && npm pack --silent --pack-destination "$$d" | tail -n1); \
	  [ -f "$$d/$$f" ] || { echo "node-dist: npm pack failed" >&2; exit 1; }; echo "$$d/$$f"

node-test: build node-deps
	cd $(NODE_PKG) && RL_MODULE=$(CURDIR)/$(MODULE) node --test --test-concurrency=2 test/

## node-test-servers: the package's tests again on each compat server (scripts/servers.sh) make compat
## has built them under target/servers/ (skipped otherwise)
node-test-servers: build node-deps
	@ran=0; for s in $(COMPAT_SERVER_BINS); do \
	  [ -x "$$s" ] || continue; ran=1; echo "node-test on $$s"; \
	  (cd $(NODE_PKG) && RL_SERVER=$(CURDIR)/$$s RL_MODULE=$(CURDIR)/$(MODULE) node --test --test-concurrency=2 test/) || exit 1; \
	done; [ $$ran = 1 ] || echo "node-test-servers: no servers under target/servers (make compat builds them); skipped"

node-compat: build node-deps
	RL_MODULE=$(CURDIR)/$(MODULE) bash $(NODE_PKG)/compat/run.sh

bench-clients-node: build node-deps
	RL_MODULE=$(CURDIR)/$(MODULE) bash $(NODE_PKG)/bench/run.sh

bench-blocks: build node-deps
	RL_MODULE=$(CURDIR)/$(MODULE) bash $(NODE_PKG)/bench/blocks.sh

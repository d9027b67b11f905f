# clients/node: the Node package (redis-ratelimit on npm). Included by the top Makefile.
#   make node-test           the package's own tests (node --test) against servers they start
#   make node-compat         rate-limiter-flexible, @nest-lab/throttler-storage-redis and
#                            express-rate-limit's own suites through the package (../shared/peers)
#   make bench-clients-node  one Express app, six limiters, autocannon: bench/CLIENTS.md "## Node"
NODE_PKG := clients/node

CLIENT_TESTS  += node-test
CLIENT_COMPAT += node-compat
CLIENT_BENCH  += bench-clients-node

.PHONY: node-deps node-test node-compat bench-clients-node

## node-deps: node + npm (Debian's, when missing) and the package's pinned dev dependencies (npm ci)
node-deps: deps
	@command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || { \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	  $(SUDO) apt-get install -y -qq --no-install-recommends nodejs npm; }
	@if [ ! -f $(NODE_PKG)/node_modules/.package-lock.json ] || \
	   [ $(NODE_PKG)/package-lock.json -nt $(NODE_PKG)/node_modules/.package-lock.json ]; then \
	  cd $(NODE_PKG) && npm ci --no-audit --no-fund --loglevel=error; fi

node-test: build node-deps
	cd $(NODE_PKG) && RL_MODULE=$(CURDIR)/$(MODULE) node --test --test-concurrency=1 test/

node-compat: build node-deps
	RL_MODULE=$(CURDIR)/$(MODULE) bash $(NODE_PKG)/compat/run.sh

bench-clients-node: build node-deps
	RL_MODULE=$(CURDIR)/$(MODULE) bash $(NODE_PKG)/bench/run.sh

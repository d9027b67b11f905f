# redis-ratelimit — every target installs what it needs on a fresh Debian machine.
#   make run    build the release module and serve it on 127.0.0.1:6379 (foreground)
#   make test   formatting, lints, unit + property tests, integration tests on real servers
#   make bench  the performance table (bench/RESULTS.md)

SHELL      := /bin/bash
CARGO      ?= cargo
SUDO       := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
MODULE     := target/release/libredis_ratelimit.so
APT_PKGS   := libclang-dev redis-server redis-tools

.PHONY: deps build run test lint unit integration bench clean

## deps: install libclang (bindgen), redis-server and redis-cli when missing.
deps:
	@missing=""; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	command -v redis-cli >/dev/null 2>&1 || missing="$$missing redis-tools"; \
	[ -n "$${LIBCLANG_PATH:-}" ] || ls /usr/lib/llvm-*/lib/libclang.so >/dev/null 2>&1 \
	  || ls /usr/lib/*/libclang.so >/dev/null 2>&1 || missing="$$missing libclang-dev"; \
	command -v cc >/dev/null 2>&1 || missing="$$missing build-essential"; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	  $(SUDO) pkill -x redis-server 2>/dev/null || true; \
	fi

## build: the release module at target/release/libredis_ratelimit.so
build: deps
	$(CARGO) build --release

## run: serve the module on 127.0.0.1:6379 in the foreground (redis.conf)
run: deps build
	redis-server redis.conf

## test: everything CI checks
test: deps lint unit integration

lint:
	$(CARGO) fmt --check
	$(CARGO) clippy --all-targets -- -D warnings

unit:
	$(CARGO) test --lib

## integration: the load test holds 1000 connections, so lift the soft open-files limit first.
integration:
	ulimit -n 8192 2>/dev/null || ulimit -n "$$(ulimit -Hn)" 2>/dev/null || true; \
	$(CARGO) test --test '*'

bench: deps build
	bash bench/run.sh

clean:
	$(CARGO) clean
	rm -rf tmp bench/tmp

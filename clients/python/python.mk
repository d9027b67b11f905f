# clients/python: the Python package (redis-ratelimit, import redis_ratelimit). Included by the
# top Makefile.
#   make python-test           lint (ruff), types (mypy --strict) and the package's pytest suite
#                              (tests/test_async_generated.py: aio.py is what gen_aio.py writes from client.py)
#                              against servers it starts on free ports (single node, 3-master
#                              cluster), with the Flask-Limiter and FastAPI/SlowAPI examples
#   make python-dist           the wheel and sdist into dist/ (redis_ratelimit-<version>-py3-none-any.whl,
#                              redis_ratelimit-<version>.tar.gz), built in the package venv
#   make python-compat         the package's suite on the compat servers (scripts/servers.sh), then limits
#                              5.8.0's and Flask-Limiter 4.1.1's own suites through the package's
#                              storages (../shared/peers; clients/python/compat/run.sh)
#   make bench-clients-python  limits' stock RedisStorage against ModuleStorage:
#                              bench/CLIENTS.md "## Python"
#   make bench-blocks-python   PermitBlock on one hot key, 8 processes, block sizes 1/10/100:
#                              bench/CLIENTS.md "## Permit blocks (Python)" (BLOCKS_SECONDS per size)
PY_PKG  := clients/python
PY_VENV := target/clients-python-venv
PY_BIN   = $(abspath $(PY_VENV))/bin
# The oldest redis-py the package supports: its typed sources, for the snippets' mypy check
# (tests/test_snippets_typecheck.py), installed beside the venv (no other dependency).
PY_REDIS_OLDEST := 5.3.1
PY_REDIS_OLDEST_DIR := target/clients-python-redis-$(PY_REDIS_OLDEST)

CLIENT_TESTS  += python-test
CLIENT_DEPS   += python-deps
CLIENT_COMPAT_BESIDE += python-compat
CLIENT_BENCH  += bench-clients-python bench-blocks-python

.PHONY: python-system python-deps python-test python-compat python-dist bench-clients-python bench-blocks-python

## python-system: python3 with venv (Debian's, when missing)
python-system: deps
	@command -v python3 >/dev/null 2>&1 && python3 -c 'import venv, ensurepip' 2>/dev/null || { \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	  $(SUDO) apt-get install -y -qq --no-install-recommends python3 python3-venv; }

## python-deps: the package's venv with the pinned test requirements (PyPI)
python-deps: python-system
	@[ -x $(PY_BIN)/python3 ] || python3 -m venv $(PY_VENV)
	@if [ ! -f $(PY_VENV)/.requirements ] || ! cmp -s $(PY_PKG)/requirements-dev.txt $(PY_VENV)/.requirements; then \
	  $(PY_BIN)/pip install -q -r $(PY_PKG)/requirements-dev.txt && \
	  cp $(PY_PKG)/requirements-dev.txt $(PY_VENV)/.requirements; fi
	@[ -f $(PY_REDIS_OLDEST_DIR)/redis/py.typed ] || \
	  $(PY_BIN)/pip install -q --no-deps --target $(PY_REDIS_OLDEST_DIR) redis==$(PY_REDIS_OLDEST)

## python-dist: the wheel and sdist into dist/ (python -m build in the package venv; its isolated
## build environment takes setuptools from PyPI)
python-dist: python-deps
	@mkdir -p dist && rm -f dist/redis_ratelimit-*.whl dist/redis_ratelimit-*.tar.gz
	$(PY_BIN)/python -m build --outdir $(abspath dist) $(PY_PKG)
	@rm -rf $(PY_PKG)/build $(PY_PKG)/src/*.egg-info

python-test: python-deps build python-dist
	cd $(PY_PKG) && $(PY_BIN)/ruff check src tests bench gen_aio.py ../../examples/python
	cd $(PY_PKG) && $(PY_BIN)/ruff format --check src tests bench gen_aio.py
	cd $(PY_PKG) && $(PY_BIN)/mypy --strict src
	cd $(PY_PKG) && RL_PY_REDIS_OLDEST=$(abspath $(PY_REDIS_OLDEST_DIR)) PYTHONPATH=src:tests \
	  $(PY_BIN)/pytest -p no:cacheprovider tests

## python-compat: the package's suite on each compat server (scripts/servers.sh; when make compat has built
## them under target/servers), then the peers' suites in their own venvs (their pinned
## requirements, PyPI); memcached (Debian's) is installed by compat/run.sh when missing
PY_COMPAT_SERVERS = $(COMPAT_SERVER_BINS)
python-compat: python-deps build python-dist
	@for server in $(PY_COMPAT_SERVERS); do \
	  [ -x $$server ] || continue; echo "=== clients/python tests on $$server ==="; \
	  (cd $(PY_PKG) && RL_SERVER=$(abspath .)/$$server PYTHONPATH=src:tests \
	    $(PY_BIN)/pytest -q -p no:cacheprovider tests) || exit 1; done
	bash $(PY_PKG)/compat/run.sh

bench-clients-python: python-deps build
	PYTHONPATH=$(PY_PKG)/src $(PY_BIN)/python $(PY_PKG)/bench/bench.py --write bench/CLIENTS.md

bench-blocks-python: python-deps build
	PYTHONPATH=$(PY_PKG)/src:$(PY_PKG)/bench $(PY_BIN)/python $(PY_PKG)/bench/blocks.py --write bench/CLIENTS.md

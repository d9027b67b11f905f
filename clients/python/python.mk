# clients/python: the Python package (redis-ratelimit, import redis_ratelimit). Included by the
# top Makefile.
#   make python-test           lint (ruff), types (mypy --strict) and the package's pytest suite
#                              against servers it starts on free ports (single node, 3-master
#                              cluster), with the Flask-Limiter and FastAPI/SlowAPI examples
#   make python-compat         the package's suite on the compat servers (scripts/servers.sh), then limits
#                              5.8.0's and Flask-Limiter 4.1.1's own suites through the package's
#                              storages (../shared/peers; clients/python/compat/run.sh)
#   make bench-clients-python  limits' stock RedisStorage against ModuleStorage:
#                              bench/CLIENTS.md "## Python"
PY_PKG  := clients/python
PY_VENV := target/clients-python-venv
PY_BIN   = $(abspath $(PY_VENV))/bin

CLIENT_TESTS  += python-test
CLIENT_COMPAT += python-compat
CLIENT_BENCH  += bench-clients-python

.PHONY: python-system python-deps python-test python-compat bench-clients-python

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

python-test: python-deps build
	cd $(PY_PKG) && $(PY_BIN)/ruff check src tests bench ../../examples/python/flask_limiter_app.py \
	  ../../examples/python/fastapi_app.py
	cd $(PY_PKG) && $(PY_BIN)/ruff format --check src tests bench
	cd $(PY_PKG) && $(PY_BIN)/mypy --strict src
	cd $(PY_PKG) && PYTHONPATH=src:tests $(PY_BIN)/pytest -p no:cacheprovider tests

## python-compat: the package's suite on each compat server (scripts/servers.sh; when make compat has built
## them under target/servers), then the peers' suites in their own venvs (their pinned
## requirements, PyPI); memcached (Debian's) is installed by compat/run.sh when missing
PY_COMPAT_SERVERS = $(COMPAT_SERVER_BINS)
python-compat: python-deps build
	@for server in $(PY_COMPAT_SERVERS); do \
	  [ -x $$server ] || continue; echo "=== clients/python tests on $$server ==="; \
	  (cd $(PY_PKG) && RL_SERVER=$(abspath .)/$$server PYTHONPATH=src:tests \
	    $(PY_BIN)/pytest -q -p no:cacheprovider tests) || exit 1; done
	bash $(PY_PKG)/compat/run.sh

bench-clients-python: python-deps build
	PYTHONPATH=$(PY_PKG)/src $(PY_BIN)/python $(PY_PKG)/bench/bench.py --write bench/CLIENTS.md

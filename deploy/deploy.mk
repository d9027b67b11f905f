# deploy/: the Grafana dashboard (grafana/ratelimit.json) and the Prometheus alert rules
# (prometheus/alerts.yml) for the client packages' metrics. Included by the top Makefile after
# the client packages' fragments.
#   make deploy-test   promtool check rules, then deploy/test/test_dashboard.py: a real Prometheus
#                      (Debian's, on a free port) scraping a Node app and a Python app after known
#                      traffic evaluates every panel's and rule's query (about 15 s)
CLIENT_TESTS += deploy-test


.PHONY: prometheus deploy-test

## prometheus: Debian's prometheus and promtool (kept from starting as a service: scripts/apt-install.sh)
prometheus: deps
	@command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1 || { \
	  $(SUDO) apt-get update -qq && SUDO="$(SUDO)" POLICY_RC_D="$(POLICY_RC_D)" bash scripts/apt-install.sh prometheus; }

deploy-test: build node-deps python-deps prometheus
	promtool check rules deploy/prometheus/alerts.yml
	cd $(PY_PKG) && $(PY_BIN)/ruff check ../../deploy/test && $(PY_BIN)/ruff format --check ../../deploy/test
	RL_MODULE=$(CURDIR)/$(MODULE) PYTHONPATH=$(PY_PKG)/src:$(PY_PKG)/tests $(PY_BIN)/pytest -q -p no:cacheprovider \
	  -o asyncio_default_fixture_loop_scope=function deploy/test

# The two commands: `make run` (portal on the embedded default) and `make test` (the whole suite).
PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install run test test-fast screenshots lint imports typecheck check migrations-check bench clean

install: $(VENV)/.installed

$(VENV)/.installed: requirements.lock
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.lock
	@touch $@

run: install
	HOST=$(HOST) PORT=$(PORT) PY=$(PY) bin/run-portal

# In parallel on every core (pytest-xdist). Tests that must not share the machine with their own kind
# (a module-wide trained checkpoint) carry @pytest.mark.xdist_group and run on one worker (--dist
# loadgroup); the browser tests are dealt to two such groups, so at most two Chromiums run at once
# (tests/browser/conftest.py). One more worker than cores measured no faster. The 25 slowest tests are listed at the end; a test not marked
# slow that takes more than a few seconds fails (tests/time_limit.py). PARALLEL= runs serially.
# Bytecode is written even where the environment says not to (PYTHONDONTWRITEBYTECODE, set on our
# machines): each test process re-parsed and assertion-rewrote 600 modules without it (24 s of CPU a
# process, 15 s with the cache), and every subprocess a test starts (manage.py, Celery workers, the
# trainer) compiled the portal again. __pycache__ is ignored by git.
PARALLEL ?= -n auto --dist loadgroup
WRITE_BYTECODE := env -u PYTHONDONTWRITEBYTECODE
test: install
	$(WRITE_BYTECODE) $(PY) -m pytest -p no:cacheprovider $(PARALLEL) --durations=25 $(PYTEST_ARGS)

# The edit loop: the suite without the tests marked slow (a real Celery worker, the browser, training).
test-fast: install
	$(WRITE_BYTECODE) $(PY) -m pytest -p no:cacheprovider $(PARALLEL) --durations=25 -m "not slow" $(PYTEST_ARGS)

# The browser tests with their screenshots taken (test-artifacts/browser/): every page at 390 and 1280 px
# and each step of the stories, to look at. `make test` takes them only of a browser test that fails.
screenshots: install
	PORTAL_TEST_SCREENSHOTS=1 $(WRITE_BYTECODE) $(PY) -m pytest -p no:cacheprovider $(PARALLEL) -m browser $(PYTEST_ARGS)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# The dependency rule (pyproject.toml [tool.importlinter], docs/architecture.md).
imports: install
	$(VENV)/bin/lint-imports --no-cache

typecheck: install
	$(VENV)/bin/mypy auditportal trainer tests bench docs/examples

migrations-check: install
	$(PY) manage.py makemigrations --check --dry-run --settings=auditportal.settings.test

check: lint imports typecheck migrations-check

bench: install
	$(PY) bench/register_dataset.py
	$(PY) bench/group_metrics.py
	$(PY) bench/trainer_overhead.py
	$(PY) bench/audit_predictions.py
	$(PY) bench/report.py
	DATABASE_URL=$${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test} $(PY) bench/ingest.py
	$(PY) bench/dashboard.py
	$(PY) bench/api_load.py
	$(PY) bench/monitoring.py
	$(PY) bench/whatif.py
	$(PY) bench/attribution_task.py

clean:
	rm -rf $(VENV) var

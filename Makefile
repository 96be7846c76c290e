# The two commands a new user needs: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
OLO    := $(VENV)/bin/oloproof
DEMO   := .demo/support_bot

.PHONY: demo test test-suite test-fast test-pythons test-lowest ci lint bench clean venv screenshots

$(VENV)/bin/activate:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

$(VENV)/.installed: $(VENV)/bin/activate pyproject.toml
	$(PIP) install --quiet -e .
	touch $@

# ppi-python (the reference for the corrected estimate's tests) is put in a folder of
# its own, without its own `tests` package, which would shadow this repository's; its
# dependencies come with the test extra.
$(VENV)/.installed-test: $(VENV)/.installed pyproject.toml
	$(PIP) install --quiet -e '.[test]'
	rm -rf $(VENV)/ppi-reference
	$(PIP) install --quiet --no-deps --target $(VENV)/ppi-reference 'ppi-python==0.2.3'
	rm -rf $(VENV)/ppi-reference/tests
	touch $@

venv: $(VENV)/.installed

# Copies the support_bot example into .demo/ and runs it end to end on the
# embedded SQLite store. Its gate blocks on INSUFFICIENT_EVIDENCE (exit 3): that
# is the expected outcome of 18 cases against a 70% floor, so the demo reports
# the exit code instead of failing on it. Run it twice: the second run is all cache.
# It ends by writing the run's HTML report and pointing at it.
demo: $(VENV)/.installed
	@test -f $(DEMO)/oloproof.yaml || { $(OLO) init $(DEMO) --example support_bot >/dev/null \
	  && echo "Copied the support_bot example into $(DEMO)/"; }
	@cd $(DEMO) && ../../$(OLO) run; code=$$?; \
	  echo; echo "oloproof run exited with code $$code (3 = a blocking INSUFFICIENT_EVIDENCE)"; \
	  echo "Project: $(DEMO) · try: cd $(DEMO) && ../../$(OLO) plan latest --run"; \
	  test $$code -le 5 -a $$code -ne 2 || exit $$code; \
	  report=$$(../../$(OLO) report latest) || exit 2; \
	  echo "HTML report: $(DEMO)/$${report#Report written to } (one file; open it in a browser, offline)"; \
	  echo "To type the oloproof commands above as they are printed: . $(VENV)/bin/activate && cd $(DEMO)"

# Everything, as .ci/run runs it: the whole suite on this Python (test-suite), then the fast
# tier and every example on every other Python the package claims (test-pythons), and the
# fast tier on the lowest dependency versions (test-lowest). On a machine with Python 3.11
# only, the other Pythons are skipped with a notice; CI sets OLOPROOF_REQUIRE_PYTHONS=1,
# and a claimed Python that is missing fails it.
test: test-suite test-pythons test-lowest

# Lint first (ruff, mypy --strict on src/, the import layers), then the whole suite:
# pytest's summary is the last line. Three workers (pytest-xdist), one test module each at
# a time: most tests wait on subprocesses and servers, so three fit on two cores.
test-suite: $(VENV)/.installed-test
	$(VENV)/bin/ruff check src tests bench tools
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(PY) -m pytest -q -n 3 --dist loadfile

# The fast tier (under a minute): tests that start no process and no server, themselves or
# through a fixture, and take no more than about a second; tests/conftest.py marks the
# others `slow` (and a test that is slow for another reason says so itself).
test-fast: $(VENV)/.installed-test
	$(PY) -m pytest -q -m "not slow" -p no:cacheprovider -n 2

# Every other Python the package claims (requires-python >= 3.11): the fast tier and every
# example end to end (tests/acceptance/test_every_example.py), each in a venv of its own
# (.venv-3.12, .venv-3.13). .ci/find-python finds the interpreters and fails, saying what
# to install, when one is missing (OLOPROOF_REQUIRE_PYTHONS=1) or skips it with a notice.
# `make test-suite PYTHON=python3.12 VENV=.venv-3.12` runs the whole suite on one of them.
CI_PYTHONS ?= 3.12 3.13
test-pythons:
	@for v in $(CI_PYTHONS); do \
	  py=$$(.ci/find-python $$v) || { test -z "$$OLOPROOF_REQUIRE_PYTHONS" && continue; exit 1; }; \
	  .ci/check-python .venv-$$v "$$py" || exit 1; done

# The lowest versions of the runtime dependencies pyproject.toml accepts
# (.ci/lowest-versions.txt), on the oldest Python claimed: the fast tier.
test-lowest:
	@py=$$(.ci/find-python 3.11) || { test -z "$$OLOPROOF_REQUIRE_PYTHONS"; exit $$?; }; \
	  .ci/check-python .venv-lowest "$$py" .ci/lowest-versions.txt

ci: test

lint: $(VENV)/.installed-test
	$(VENV)/bin/ruff check src tests bench tools
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

bench: $(VENV)/.installed-test
	$(PY) bench/run_all.py

# The screenshots in docs/screenshots/ (the README shows them): the compare example's
# reports (and the viewer), photographed in Debian's headless chromium.
screenshots: $(VENV)/.installed-test
	$(PY) tools/screenshots.py

clean:
	rm -rf $(VENV) .venv-3.* .venv-lowest .demo build *.egg-info src/*.egg-info

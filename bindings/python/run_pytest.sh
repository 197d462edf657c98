#!/bin/sh
# Runs pytest on the binding's tests for ctest: run_pytest.sh PYTHON ARGS...
# Exits 77 (skipped) where PYTHON or its pytest is missing, or 1 when
# CRONOQ_REQUIRE_PYTHON is set (CI installs them). Leaves no cache or
# bytecode in the source tree.
python=$1
shift
if ! "$python" -c 'import pytest' >/dev/null 2>&1; then
  echo "$python -m pytest is not available (Debian: python3, python3-pytest)"
  if [ -n "${CRONOQ_REQUIRE_PYTHON:-}" ]; then
    exit 1
  fi
  echo "skipped"
  exit 77
fi
PYTHONDONTWRITEBYTECODE=1 exec "$python" -m pytest -p no:cacheprovider -q -rs "$@"

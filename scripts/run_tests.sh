#!/usr/bin/env bash
# Runs the whole test suite: unit tests, integration tests against the embedded llama.cpp server,
# and nbval regression of the committed notebooks. pytest's exit code 5 (no test collected)
# is a failure here, never a silent success.
set -uo pipefail
PY=${1:-python}
cd "$(dirname "$0")/.."
"$PY" -m pytest -p no:cacheprovider -ra tests notebooks --nbval --nbval-sanitize-with tests/nbval_sanitize.cfg
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "run_tests.sh: pytest collected no tests; treating that as a failure" >&2
  exit 1
fi
exit "$rc"

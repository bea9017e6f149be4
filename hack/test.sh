#!/usr/bin/env bash
# Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.
#
# make test: every stage CI runs, stopping after the first that fails, then the time table (each
# stage's wall time, the 15 slowest suites and tests). The package tests (systemd containers, no rig)
# run beside the e2e rows, whose suites mostly wait on their clusters; their output follows the rows'.
# Environment (from the Makefile): MAKE, TEST_ROWS, PROBESHIM_TEST_TIMES (the table's records).
set -uo pipefail
cd "$(dirname "$0")/.."
: "${PROBESHIM_TEST_TIMES:?set by make test}" "${TEST_ROWS:?set by make test}"
export PROBESHIM_TEST_TIMES
make=${MAKE:-make}

mkdir -p "$(dirname "$PROBESHIM_TEST_TIMES")"
rm -f "$PROBESHIM_TEST_TIMES"
table() { echo; go run ./hack/testreport -table "$PROBESHIM_TEST_TIMES"; }

# stage NAME [BESIDE [NICE]]: make NAME (at niceness NICE), its wall time recorded (and what it ran
# beside: not in the total).
stage() {
	local t0=$SECONDS rc=0
	nice -n "${3:-0}" "$make" --no-print-directory "$1" || rc=$?
	echo "{\"stage\":\"$1\",\"beside\":\"${2:-}\",\"seconds\":$((SECONDS - t0))}" >>"$PROBESHIM_TEST_TIMES"
	return $rc
}

# make integration runs every test of its packages: make unit leaves them to it.
export UNIT_SKIP_INTEGRATION=1
# The rest of row 1's Kubernetes binaries build beside the integration tests, which mostly wait on
# their API servers (on a cold machine that hides several minutes of builds).
export INTEGRATION_BUILD_ROW=1
for s in unit integration; do
	stage "$s" || { table; exit 1; }
done

pkglog=$(mktemp /tmp/probeshim-package-test.XXXXXX)
trap 'rm -f "$pkglog"' EXIT
# At the lowest CPU priority: its builds and systemd containers can wait, the rows' probes cannot (a
# healthy pod's exec probe that waits 5 s for the CPU fails, and the decider restarts it). It then
# mostly runs once the rows are done: its timeout (PACKAGE_TEST_TIMEOUT) leaves room for that.
echo "== package-test runs beside the e2e rows at nice 19; its output follows theirs"
stage package-test "the e2e rows" 19 >"$pkglog" 2>&1 &
pkg=$!
rc=0
"$make" --no-print-directory e2e ROW="$TEST_ROWS" || rc=1
wait $pkg || rc=1
echo "== package-test"
cat "$pkglog"
table
exit $rc

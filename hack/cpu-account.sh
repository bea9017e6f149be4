#!/usr/bin/env bash
# Runs a command with the kernel's process accounting on and prints where the machine's CPU went
# while it ran: CPU minutes by command name of every process that ended meanwhile (sa(8)), the
# rig's API servers, runc and its shims, links and test binaries alike. The test command is
# CPU-bound on 2 cores, so this, not wall time, says what to cut (docs/development.md).
#   hack/cpu-account.sh make e2e ROW=k1.37-c2.4
# Root (acct(2)); a process still running at the end is not counted, and accounting is machine-wide.
# It turns accounting off when it ends, so a host whose acct.service kept it on wants that restarted.
set -euo pipefail
[[ $# -gt 0 ]] || { echo "usage: $0 COMMAND..." >&2; exit 2; }
[[ $(id -u) -eq 0 ]] || { echo "cpu-account: process accounting needs root" >&2; exit 1; }
"$(dirname "$0")/ensure-packages.sh" profile
file=$(mktemp /tmp/probeshim-pacct.XXXXXX)
accton "$file" >/dev/null
trap 'accton off >/dev/null; rm -f "$file"' EXIT
start=$(date +%s)
rc=0
"$@" || rc=$?
accton off >/dev/null
echo "== cpu-account: $* exited $rc after $(( $(date +%s) - start ))s; CPU minutes by command (sa -c), the top 25:"
# Columns: processes, real minutes, CPU minutes (user+system), average memory, command.
sa -f "$file" -a -c | sed -n 1,26p # sed reads it all: head would end sa with SIGPIPE, and pipefail the script
exit $rc

#!/usr/bin/env bash
# Runs a command with its output (stdout and stderr, merged) passed through,
# and prints a line of its own whenever the command has printed nothing for
# 20 s, so that a long quiet step (a cold compile, a package whose tests take
# minutes, a static analysis of the whole tree) never leaves the terminal
# silent. Its own lines go to stderr, so `out="$(hack/progress.sh ...)"` keeps
# only the command's. Exits with the command's exit code.
#
#   hack/progress.sh "go vet" go vet ./...
#
# With PROGRESS_LOG=FILE the output is appended to FILE instead, and the line
# of progress comes every 20 s.
set -uo pipefail
if [ $# -lt 2 ]; then
	echo "usage: hack/progress.sh LABEL COMMAND [ARG...]: expected a label and a command, saw $# arguments" >&2
	exit 2
fi
label="$1"
shift
start=$(date +%s)
stamp="$(mktemp)"
(
	while sleep 5; do
		[ -e "$stamp" ] || exit 0
		now=$(date +%s)
		quiet=$(( now - $(stat -c %Y "$stamp") ))
		if [ "$quiet" -ge 20 ]; then
			echo "    ... $label: running, $(( now - start ))s so far" >&2
			touch "$stamp"
		fi
	done
) &
ticker=$!
log="${PROGRESS_LOG:-}"
unset PROGRESS_LOG
if [ -n "$log" ]; then
	# The output goes to the log, so the terminal sees only the lines of
	# progress: one every 20 s.
	"$@" >>"$log" 2>&1
	rc=$?
else
	"$@" 2>&1 | while IFS= read -r line; do
		printf '%s\n' "$line"
		touch "$stamp"
	done
	rc=${PIPESTATUS[0]}
fi
rm -f "$stamp"
kill "$ticker" 2>/dev/null
wait "$ticker" 2>/dev/null
exit "$rc"

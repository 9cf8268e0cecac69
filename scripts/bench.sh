#!/usr/bin/env bash
# Runs the Go benchmarks of every package. Tools add their own
# command-level benchmarks as scripts/bench-<tool>.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
go test -run '^$' -bench . -benchmem -count 1 github.com/powerglide/powerglide/pkg/...
for b in scripts/bench-*.sh; do
	[ -e "$b" ] || continue
	echo "== $b"
	"$b"
done

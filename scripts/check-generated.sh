#!/usr/bin/env bash
# Fails when the generated files committed to the repository (schemas, the
# protocol reference, man pages, completions) differ from what `make generate` just produced.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! git rev-parse --git-dir >/dev/null 2>&1; then
	echo "check-generated: not a git checkout, skipping the staleness check" >&2
	exit 0
fi
paths=(pkg/protocol/schemas docs/protocol.md man completions)
stale=$(git status --porcelain -- "${paths[@]}")
if [ -n "$stale" ]; then
	echo "check-generated: generated files are stale; run 'make generate' and commit:" >&2
	echo "$stale" >&2
	git --no-pager diff --stat -- "${paths[@]}" >&2
	exit 1
fi
echo "check-generated: schemas, man pages and completions are current"

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
# The man pages must render: man -l (or groff when man is missing) reads
# each one, and the NAME and EXIT STATUS sections must come out.
render() {
	if command -v man >/dev/null; then
		MANWIDTH=80 man -l "$1" 2>/dev/null
	elif command -v groff >/dev/null; then
		groff -man -Tutf8 "$1" 2>/dev/null
	else
		return 2
	fi
}
for page in man/pg-*.1; do
	out=$(render "$page") || {
		status=$?
		if [ "$status" -eq 2 ]; then
			echo "check-generated: neither man nor groff is installed; man pages not rendered" >&2
			break
		fi
		echo "check-generated: $page does not render (man -l exit $status)" >&2
		exit 1
	}
	# troff's warnings (a line it cannot adjust: a long unbreakable word in a
	# --help text; a bad escape) are errors too.
	if command -v man >/dev/null && warnings=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null) && [ -n "$warnings" ]; then
		echo "check-generated: $page renders with troff warnings (fix the --help text it comes from, then make generate):" >&2
		echo "$warnings" >&2
		exit 1
	fi
	for section in NAME "EXIT STATUS"; do
		if ! grep -q "^$section" <<<"$out"; then
			echo "check-generated: $page renders without a $section section" >&2
			exit 1
		fi
	done
done
echo "check-generated: schemas, man pages and completions are current; man pages render"

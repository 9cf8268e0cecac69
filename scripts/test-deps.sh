#!/usr/bin/env bash
# Installs what the tests need beyond Go modules. Each tool's needs are
# listed here so a fresh machine gets them from `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
# (tools add their test dependencies here)

# pg-dash: the end-to-end test drives the dashboard in tmux.
if ! command -v tmux >/dev/null 2>&1; then
	if command -v apt-get >/dev/null 2>&1; then
		SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
		$SUDO apt-get update -qq && $SUDO apt-get install -y -qq tmux
	else
		echo "test-deps: install tmux for pg-dash's tests" >&2
		exit 1
	fi
fi
exit 0

#!/usr/bin/env bash
# Installs what the tests need beyond Go modules. Each tool's needs are
# listed here so a fresh machine gets them from `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."

# pg-tool: the MCP servers its tests talk to, installed once into
# testdata/mcp/node_modules (gitignored). Re-running is a no-op when the
# pinned versions are already there.
mcp_deps() {
	local dir=testdata/mcp
	if ! command -v npm >/dev/null 2>&1; then
		echo "test-deps: npm not found: the pg-tool MCP tests will FAIL (install nodejs and npm, or set POWERGLIDE_TEST_NO_NPM=1 to skip them)" >&2
		return 0
	fi
	if [ -e "$dir/node_modules/@modelcontextprotocol/server-everything/package.json" ] &&
		[ -e "$dir/node_modules/@modelcontextprotocol/server-filesystem/package.json" ]; then
		return 0
	fi
	echo "test-deps: npm install MCP test servers into $dir" >&2
	(cd "$dir" && npm install --no-audit --no-fund --loglevel=error >/dev/null)
}
mcp_deps

# pg-monitor: its queue double (testdata/monitor/fake-pg-queue) and script
# workers need jq and flock(1).
monitor_deps() {
	local missing=()
	command -v jq >/dev/null 2>&1 || missing+=(jq)
	command -v flock >/dev/null 2>&1 || missing+=(util-linux)
	[ ${#missing[@]} -eq 0 ] && return 0
	if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
		echo "test-deps: apt-get install ${missing[*]}" >&2
		apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1 ||
			{ apt-get update -qq >/dev/null && apt-get install -y -qq "${missing[@]}" >/dev/null; }
	else
		echo "test-deps: ${missing[*]} not found: the pg-monitor process tests will be SKIPPED" >&2
	fi
}
monitor_deps

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
# pg-pty: real interactive programs its tests drive (bash, python3's REPL,
# less as the full-screen program) and script(1) for its benchmark. A
# fresh Debian image lacks less and python3; apt-get runs only for what is
# missing.
pty_deps() {
	local missing=() pkg
	for pkg in bash less python3 bsdutils; do
		dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	echo "test-deps: apt-get install ${missing[*]} (pg-pty tests)" >&2
	local sudo=""
	[ "$(id -u)" -ne 0 ] && sudo="sudo"
	$sudo apt-get update -qq >/dev/null
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
pty_deps
exit 0

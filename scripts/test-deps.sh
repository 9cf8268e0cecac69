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
		echo "test-deps: npm not found: the pg-tool MCP tests will be SKIPPED (install nodejs and npm)" >&2
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

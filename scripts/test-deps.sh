#!/usr/bin/env bash
# Installs what the tests need beyond Go modules. Each tool's needs are
# listed here so a fresh machine gets them from `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
# (tools add their test dependencies here)

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

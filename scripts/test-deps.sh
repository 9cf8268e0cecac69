#!/usr/bin/env bash
# Installs what the tests need beyond Go modules, so a fresh machine gets it
# from `make test`. Programs are looked up on PATH (not in a package
# database), so any distribution that already has them needs nothing; what
# is missing is installed with apt-get when that is possible (root, or sudo
# without a password), and otherwise named loudly on stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

# program → Debian package, and the tests that need it.
declare -A pkg_of=(
	[jq]=jq             # pg-monitor's queue double, the swarm and cron scripts
	[flock]=util-linux  # script workers, the cron example
	[tmux]=tmux         # pg-dash's end-to-end test
	[bash]=bash         # pg-pty: an interactive shell
	[less]=less         # pg-pty: the full-screen program
	[python3]=python3   # pg-pty: the REPL; pg-tool: a hanging MCP server
	[script]=bsdutils   # pg-pty's benchmark baseline
	[ip]=iproute2       # the multi-host test: network namespaces, veth, a bridge
	[unshare]=util-linux # the multi-host test: a hostname per simulated host
	[hostname]=hostname # the same
	[psql]=postgresql-client # the multi-host test runs the README's psql step (initdb may come from POWERGLIDE_PG_BIN)
	[zsh]=zsh           # completions: a real interactive zsh takes the first Tab (TestZshCompletesOnFirstTab)
	[git]=git           # pg-loop's commit step
	[mkfifo]=coreutils  # the irregular team-file scripts (also truncate, and timeout for their exits command)
	[pgrep]=procps      # scripts that check no process is left (term_orphans, bash, pty session)
	[prlimit]=util-linux # pg-loop's full-disk script (memory_full: a file size limit)
)

missing=()
for prog in "${!pkg_of[@]}"; do
	command -v "$prog" >/dev/null 2>&1 || missing+=("$prog")
done

if [ ${#missing[@]} -gt 0 ]; then
	pkgs=()
	for prog in "${missing[@]}"; do pkgs+=("${pkg_of[$prog]}"); done
	sudo=""
	if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
		sudo="sudo -n"
	fi
	if command -v apt-get >/dev/null 2>&1 && { [ "$(id -u)" -eq 0 ] || [ -n "$sudo" ]; }; then
		echo "test-deps: apt-get install ${pkgs[*]} (for ${missing[*]})" >&2
		$sudo apt-get update -qq >/dev/null
		DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
	else
		echo "test-deps: WARNING: not installed: ${missing[*]}; tests that drive them will fail or skip." >&2
		echo "test-deps: install them (Debian packages: ${pkgs[*]}) and run make test again." >&2
	fi
fi

# The team store's PostgreSQL tests (pkg/store/pgtest) start their own
# server with initdb and pg_ctl, which Debian keeps off PATH in
# /usr/lib/postgresql/<version>/bin. Installed when missing, without the
# cluster and the service the package would otherwise create and start.
if [ -z "${POWERGLIDE_PG_BIN:-}" ] && ! command -v initdb >/dev/null 2>&1 &&
	! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
	sudo=""
	if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
		sudo="sudo -n"
	fi
	if command -v apt-get >/dev/null 2>&1 && { [ "$(id -u)" -eq 0 ] || [ -n "$sudo" ]; }; then
		echo "test-deps: apt-get install postgresql (for initdb and pg_ctl)" >&2
		$sudo mkdir -p /etc/postgresql-common
		[ -e /etc/postgresql-common/createcluster.conf ] ||
			echo "create_main_cluster = false" | $sudo tee /etc/postgresql-common/createcluster.conf >/dev/null
		policy=""
		if ! [ -e /usr/sbin/policy-rc.d ]; then # no service start during the install
			printf '#!/bin/sh\nexit 101\n' | $sudo tee /usr/sbin/policy-rc.d >/dev/null
			$sudo chmod +x /usr/sbin/policy-rc.d
			policy=1
		fi
		$sudo apt-get update -qq >/dev/null
		DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends postgresql >/dev/null
		[ -z "$policy" ] || $sudo rm -f /usr/sbin/policy-rc.d
	else
		echo "test-deps: WARNING: PostgreSQL's initdb not found: the team store's PostgreSQL tests will FAIL under CI=true" >&2
		echo "test-deps: and skip otherwise (install Debian's postgresql package, or set POWERGLIDE_PG_BIN)." >&2
	fi
fi

# pg-tool: the MCP servers its tests talk to and the MCP Inspector (the
# client that drives pg-tool mcp), installed once into
# testdata/mcp/node_modules (gitignored); a no-op when the pinned versions
# are there.
mcp_dir=testdata/mcp
if ! command -v npm >/dev/null 2>&1; then
	echo "test-deps: WARNING: npm not found: pg-tool's MCP tests will FAIL (install nodejs and npm)," >&2
	echo "test-deps: or set POWERGLIDE_TEST_NO_NPM=1 to skip them." >&2
elif ! [ -e "$mcp_dir/node_modules/@modelcontextprotocol/server-everything/package.json" ] ||
	! [ -e "$mcp_dir/node_modules/@modelcontextprotocol/server-filesystem/package.json" ] ||
	! [ -e "$mcp_dir/node_modules/@modelcontextprotocol/inspector/package.json" ]; then
	echo "test-deps: npm install MCP test servers and the MCP Inspector into $mcp_dir" >&2
	(cd "$mcp_dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi
exit 0

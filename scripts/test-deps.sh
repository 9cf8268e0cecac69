#!/usr/bin/env bash
# Installs what the tests need beyond Go modules. Each tool's needs are
# listed here so a fresh machine gets them from `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
# (tools add their test dependencies here)
exit 0

#!/usr/bin/env bash
# Regenerates pkg/protocol/schemas from the Go types. The generator embeds
# the current schemas, so it writes into a temporary directory first.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd pkg && go run ./protocol/internal/genschema "$tmp")
rm -f pkg/protocol/schemas/*.json
cp "$tmp"/*.json pkg/protocol/schemas/

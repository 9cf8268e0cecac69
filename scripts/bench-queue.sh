#!/usr/bin/env bash
# Measures pg-queue through its command line, a fresh process per call:
# claim+complete cycles (p50/p99) at 1k, 10k and 100k live tasks and next to
# 100k finished ones, and the cycles/s of 8 concurrent workers, with
# queue_sync true (the default: fsync every change) and false.
# The binary is built static (CGO_ENABLED=0): it starts faster than a
# dynamically linked one. Extra arguments go to the driver, e.g.
#   scripts/bench-queue.sh -sizes 1000 -cycles 100 -sync true
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$tmp/pg-queue" ./cmd/pg-queue
go build -o "$tmp/queuebench" ./pkg/queue/internal/queuebench
"$tmp/queuebench" -bin "$tmp/pg-queue" -dir "$tmp" "$@"

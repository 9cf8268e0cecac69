#!/usr/bin/env bash
# Measures pg-queue through its command line, a fresh process per call:
# claim+complete cycles (p50/p99) at 1k, 10k and 100k live tasks and next to
# 100k finished ones, and the cycles/s of 8 concurrent workers.
# Extra arguments go to the driver (see -h), e.g. -sizes 1000 -cycles 100.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bin
go build -trimpath -o bin/pg-queue ./cmd/pg-queue
go run ./pkg/queue/internal/queuebench -bin bin/pg-queue "$@"

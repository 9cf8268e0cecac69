#!/usr/bin/env bash
# The demo swarm. It runs in a temporary POWERGLIDE_HOME and never touches
# ~/.powerglide.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "demo: the swarm demo needs pg-queue, pg-monitor, pg-loop, pg-llm and pg-tool; built so far: $(ls bin 2>/dev/null | tr '\n' ' ')" >&2
exit 1

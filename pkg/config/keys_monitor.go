package config

import "time"

// pg-monitor's keys, in a file of their own so that tools add keys without
// touching each other's lines.
var monitorKeys = []Key{
	{Name: "monitor_heartbeat", Kind: KindDuration, Env: []string{"POWERGLIDE_MONITOR_STALE", "POWERGLIDE_MONITOR_HEARTBEAT"}, Default: 30 * time.Second, Help: "pg-monitor: a worker heartbeat older than this is stale (--stale)"},
	{Name: "monitor_stall", Kind: KindDuration, Env: []string{"POWERGLIDE_MONITOR_STALL"}, Default: 10 * time.Minute, Help: "pg-monitor: a worker with no progress for this long is stuck (0 disables)"},
	{Name: "monitor_grace", Kind: KindDuration, Env: []string{"POWERGLIDE_MONITOR_GRACE"}, Default: 10 * time.Second, Help: "pg-monitor: time between SIGTERM and SIGKILL"},
	{Name: "monitor_interval", Kind: KindDuration, Env: []string{"POWERGLIDE_MONITOR_INTERVAL"}, Default: 5 * time.Second, Help: "pg-monitor: time between watch passes"},
	{Name: "queue_cmd", Kind: KindString, Env: []string{"POWERGLIDE_QUEUE_CMD"}, Help: "pg-monitor: the pg-queue command (default: pg-queue next to pg-monitor, else on PATH)"},
}

package protocol

import "time"

// WorkerStatus is one worker as `pg-monitor status` reports it: the main
// fields of its record with the monitor's verdict on its liveness.
type WorkerStatus struct {
	Type          string    `json:"type" jsonschema:"enum=worker_status"`
	Worker        string    `json:"worker"`
	Liveness      string    `json:"liveness" jsonschema:"enum=alive,enum=stale,enum=stuck,enum=dead,enum=done"`
	Reason        string    `json:"reason" jsonschema:"description=why the worker has this liveness"`
	PID           int       `json:"pid"`
	Host          string    `json:"host,omitempty"`
	HostID        string    `json:"host_id,omitempty" jsonschema:"description=the record's host_id: the monitor checks and signals pid only when it is its own"`
	State         string    `json:"state"`
	Task          string    `json:"task,omitempty"`
	Step          int       `json:"step"`
	HeartbeatAt   time.Time `json:"heartbeat_at"`
	HeartbeatAgeS float64   `json:"heartbeat_age_s"`
	ProgressAgeS  float64   `json:"progress_age_s"`
	Usage         Usage     `json:"usage"`
	Spent         *Usage    `json:"spent,omitempty" jsonschema:"description=the usage of the worker's earlier processes (restarts)"`
	Stopping      bool      `json:"stopping,omitempty" jsonschema:"description=a SIGTERM or SIGKILL from the monitor is in flight"`
}

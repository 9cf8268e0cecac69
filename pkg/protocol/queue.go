package protocol

import "time"

// QueueStats is the record `pg-queue stats` prints.
type QueueStats struct {
	Type string    `json:"type" jsonschema:"enum=stats"`
	TS   time.Time `json:"ts"`
	// Live is the number of tasks in task-queue.json.
	Live int `json:"live"`
	// Counts by status; done, failed and cancelled include archived tasks.
	Pending   int `json:"pending"`
	Claimed   int `json:"claimed"`
	Done      int `json:"done"`
	Failed    int `json:"failed"`
	Cancelled int `json:"cancelled"`
	Archived  int `json:"archived" jsonschema:"description=finished tasks moved to task-archive.jsonl"`
	// Claimable: pending with every dependency done, or claimed under an
	// expired lease.
	Claimable int `json:"claimable" jsonschema:"description=pending with every dependency done\\, or claimed under an expired lease"`
	// Blocked: pending tasks with a dependency not done.
	Blocked int `json:"blocked" jsonschema:"description=pending tasks with a dependency not done"`
	// Stuck: blocked tasks that can never run, because a dependency
	// (directly or further down) failed or was cancelled, or because it
	// lies on a dependency cycle (a file edited by hand may hold one).
	Stuck int `json:"stuck" jsonschema:"description=blocked tasks that can never run: a dependency failed\\, was cancelled\\, is unknown or lies on a dependency cycle (written by hand)"`
	// Expired: claimed tasks whose lease ran out.
	Expired int `json:"expired" jsonschema:"description=claimed tasks whose lease ran out"`
	// Drained: no task is claimed and no pending task can still run; a
	// supervisor can stop.
	Drained          bool    `json:"drained" jsonschema:"description=no task is claimed and no pending task can still run"`
	OldestPending    string  `json:"oldest_pending,omitempty"`
	OldestPendingAge float64 `json:"oldest_pending_age_s"`
	// NextToken is the fencing token the next claim gets: every claim
	// made so far has a smaller one (see pg-queue release --before-token).
	NextToken int64 `json:"next_token" jsonschema:"description=the fencing token of the next claim; every earlier claim has a smaller one"`
	// Throughput counts completions in the journal's recent past.
	Throughput QueueThroughput `json:"throughput"`
}

// QueueThroughput is the number of completed tasks over recent windows.
type QueueThroughput struct {
	Last1m    int     `json:"last_1m"`
	Last5m    int     `json:"last_5m"`
	Last15m   int     `json:"last_15m"`
	PerMinute float64 `json:"per_minute" jsonschema:"description=over the last 5 minutes"`
}

// QueueCount is the record `pg-queue archive` and `pg-queue prune` print:
// how many tasks they moved or deleted.
type QueueCount struct {
	Type  string `json:"type" jsonschema:"enum=archive,enum=prune"`
	Count int    `json:"count"`
}

// StoreInit is the record `pg-queue init` prints: the store it prepared.
type StoreInit struct {
	Type          string `json:"type" jsonschema:"enum=init"`
	Store         string `json:"store" jsonschema:"enum=file,enum=postgres"`
	Team          string `json:"team"`
	Dir           string `json:"dir,omitempty" jsonschema:"description=the team directory (file store)"`
	SchemaVersion int    `json:"schema_version,omitempty" jsonschema:"description=the schema version after the migrations (PostgreSQL)"`
}

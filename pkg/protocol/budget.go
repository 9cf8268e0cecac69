package protocol

import "time"

// TeamBudget is budget.json in a team directory: the team's dollar budget,
// what its workers' model calls cost, and the calls in flight. pg-loop
// workers reserve a call's estimated cost here before they make it and
// settle its real cost after; pg-monitor run writes the budget.
type TeamBudget struct {
	Type        string    `json:"type" jsonschema:"enum=team_budget"`
	Version     int       `json:"version"`
	BudgetUSD   float64   `json:"budget_usd" jsonschema:"description=the team's budget in USD (0: none: calls are recorded and never refused)"`
	SpentUSD    float64   `json:"spent_usd" jsonschema:"description=the settled cost of the team's model calls"`
	ReservedUSD float64   `json:"reserved_usd" jsonschema:"description=the sum of the reservations: estimated cost of the calls in flight"`
	Calls       int       `json:"calls" jsonschema:"description=model calls settled"`
	UpdatedAt   time.Time `json:"updated_at"`
	// Reservations are the calls in flight, oldest first.
	Reservations []Reservation `json:"reservations"`
	// Refused is the last call the budget refused, if any.
	Refused *BudgetRefusal `json:"refused,omitempty"`
}

// Reservation is the estimated cost of one model call in flight. It ends
// when the worker settles the call, when its process is gone (same host),
// or at Until, whichever comes first; in the last two cases it is settled
// at USD.
type Reservation struct {
	ID       string    `json:"id"`
	Worker   string    `json:"worker"`
	PID      int       `json:"pid"`
	PIDStart string    `json:"pid_start"`
	Host     string    `json:"host"`
	HostID   string    `json:"host_id,omitempty" jsonschema:"description=the running kernel and pid namespace that pid belongs to (as in worker records): a reservation is dropped for a gone pid only by a reader of that host"`
	USD      float64   `json:"usd"`
	At       time.Time `json:"at"`
	Until    time.Time `json:"until" jsonschema:"description=the reservation expires then even if its process still runs"`
}

// BudgetRefusal is a call the team budget did not let start.
type BudgetRefusal struct {
	Worker string    `json:"worker"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason"`
}

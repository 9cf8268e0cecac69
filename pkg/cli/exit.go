// Package cli holds the plumbing every powerglide binary shares: kong setup,
// injected streams, the exit-code table and the one error format of
// DESIGN.md §2. A tool's main.go builds a Spec and calls Run; nothing here
// touches the process's standard streams or calls os.Exit.
package cli

import (
	"context"
	"errors"
	"fmt"
)

// The exit-code table shared by every tool (DESIGN.md §2).
const (
	ExitOK         = 0   // success
	ExitFailure    = 1   // runtime failure: the job failed
	ExitUsage      = 2   // usage error or bad input: nothing was changed
	ExitNothing    = 3   // nothing to do (e.g. no claimable task)
	ExitLimit      = 4   // a limit stopped the job
	ExitTimeout    = 124 // timeout
	ExitSignalBase = 128 // 128+n: killed by signal n
)

// Error carries an exit code and an optional error kind with the error it wraps.
type Error struct {
	Code int    // exit code from the table
	Kind string // optional machine-readable kind, e.g. "auth", "lease_lost"
	Err  error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit %d", e.Code)
	}
	return e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Exit wraps err with an exit code. A nil err yields a silent exit with code.
func Exit(code int, err error) error { return &Error{Code: code, Err: err} }

// Usagef reports bad input or a usage error (exit 2).
func Usagef(format string, args ...any) error {
	return &Error{Code: ExitUsage, Kind: "usage", Err: fmt.Errorf(format, args...)}
}

// Failf reports a runtime failure of the given kind (exit 1).
func Failf(kind, format string, args ...any) error {
	return &Error{Code: ExitFailure, Kind: kind, Err: fmt.Errorf(format, args...)}
}

// Nothingf reports that there was nothing to do (exit 3).
func Nothingf(format string, args ...any) error {
	return &Error{Code: ExitNothing, Kind: "nothing", Err: fmt.Errorf(format, args...)}
}

// Limitf reports that a limit stopped the job (exit 4).
func Limitf(format string, args ...any) error {
	return &Error{Code: ExitLimit, Kind: "limit", Err: fmt.Errorf(format, args...)}
}

// Silent is an exit with code and no message: the tool already said what
// it had to (e.g. a child's exit code passed through).
func Silent(code int) error { return &Error{Code: code} }

// UsageError marks errors from other packages that mean "bad input" without
// importing this package (config file errors, decoder line errors).
type UsageError interface {
	error
	BadInput() bool
}

// ExitCode maps an error to the exit-code table.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	var u UsageError
	if errors.As(err, &u) && u.BadInput() {
		return ExitUsage
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return ExitTimeout
	}
	if errors.Is(err, context.Canceled) {
		return ExitSignalBase + 2
	}
	return ExitFailure
}

// Kind returns the error's kind, or "" when it has none.
func Kind(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Kind != "" {
		return e.Kind
	}
	var u UsageError
	if errors.As(err, &u) && u.BadInput() {
		return "usage"
	}
	return ""
}

//go:build !pgqueue_crashtest

package pgqueue

// crashHook is nil in every build but the crash tests' (crashhook.go).
func crashHook() func(string) bool { return nil }

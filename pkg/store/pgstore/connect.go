package pgstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// connectErr names the server an error came from (never the password),
// once: an error it already named (from migrate, say) stays as it is. A
// failed connection becomes one line that says the cause once (cause).
func connectErr(cfg *pgxpool.Config, err error) error {
	var named *serverError
	if err == nil || errors.As(err, &named) {
		return err
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return cannotConnect(cfg, cause(cfg, ce), err)
	}
	cc := cfg.ConnConfig
	where := fmt.Sprintf("%s/%s", address(cc.Host, cc.Port), cc.Database)
	if strings.Contains(err.Error(), where) || strings.Contains(err.Error(), cc.Host) {
		return &serverError{msg: "postgres: " + err.Error(), err: err}
	}
	return &serverError{msg: fmt.Sprintf("postgres %s: %v", where, err), err: err}
}

// openErr is connectErr for the first connection of a store: a deadline
// that ends it before pgx gave up (the command's own, Options.Began) is
// a server that did not answer in time too.
func openErr(cfg *pgxpool.Config, err error) error {
	var ce *pgconn.ConnectError
	if errors.Is(err, context.DeadlineExceeded) && !errors.As(err, &ce) {
		return cannotConnect(cfg, reason(cfg, err), err)
	}
	return connectErr(cfg, err)
}

// cannotConnect is the one line of a failed connection: the server, the
// user and the database, and why.
func cannotConnect(cfg *pgxpool.Config, why string, err error) error {
	cc := cfg.ConnConfig
	return &serverError{msg: fmt.Sprintf("cannot connect to PostgreSQL at %s (user %s, database %s): %s",
		servers(cfg), cc.User, cc.Database, why), err: err}
}

// serverError is an error connectErr named the server of. It unwraps to
// the driver's error: a connect timeout is still context.DeadlineExceeded
// (exit 124).
type serverError struct {
	msg string
	err error
}

func (e *serverError) Error() string { return e.msg }
func (e *serverError) Unwrap() error { return e.err }

// servers is the address of the server, and of the others a
// multi-host URL names, each once.
func servers(cfg *pgxpool.Config) string {
	cc := cfg.ConnConfig
	list := []string{address(cc.Host, cc.Port)}
	for _, f := range cc.Fallbacks {
		a := address(f.Host, f.Port)
		if !contains(list, a) {
			list = append(list, a)
		}
	}
	return strings.Join(list, ", ")
}

// address is host:port, or the socket file of a Unix-socket directory.
func address(host string, port uint16) string {
	if strings.HasPrefix(host, "/") {
		return strings.TrimSuffix(host, "/") + "/.s.PGSQL." + strconv.Itoa(int(port))
	}
	return net.JoinHostPort(host, strconv.Itoa(int(port)))
}

// cause says why a connection failed, each reason once. pgx tries each
// address, and with sslmode=prefer (the default) each twice, TLS first:
// every attempt's reason is in ce. What the server answered (a wrong
// password, an unknown role or database) says the most; a TLS refusal
// from a server without TLS, the first attempt's under prefer, says
// nothing when another attempt tells more.
func cause(cfg *pgxpool.Config, ce *pgconn.ConnectError) string {
	var pe *pgconn.PgError
	if errors.As(ce, &pe) {
		return fmt.Sprintf("%s (%s)", pe.Message, pe.Code)
	}
	var reasons []string
	for _, a := range attempts(ce.Unwrap()) {
		r := reason(cfg, a)
		if !contains(reasons, r) {
			reasons = append(reasons, r)
		}
	}
	if len(reasons) > 1 {
		reasons = without(reasons, tlsRefused)
	}
	return strings.Join(reasons, "; ")
}

// tlsRefused is what pgx says when a server without TLS refuses it.
const tlsRefused = "server refused TLS connection"

// attempts are the errors of the connection attempts: the leaves of the
// errors pgx joins.
func attempts(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, attempts(e)...)
		}
		return out
	}
	if err == nil {
		return nil
	}
	return []error{err}
}

// reason is one attempt's cause, without pgx's address and stage.
func reason(cfg *pgxpool.Config, err error) string {
	var dns *net.DNSError
	var errno syscall.Errno
	switch {
	case pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded):
		if d := cfg.ConnConfig.ConnectTimeout; d > 0 {
			return fmt.Sprintf("no answer within %s (connect_timeout)", d)
		}
		return "no answer in time"
	case errors.As(err, &dns):
		return fmt.Sprintf("cannot resolve host %s: %s", dns.Name, dns.Err)
	case errors.As(err, &errno):
		return errno.Error()
	}
	msg := err.Error()
	// "127.0.0.1:5432 (db): tls error: server refused TLS connection"
	if u := errors.Unwrap(err); u != nil && strings.HasSuffix(msg, u.Error()) {
		msg = u.Error()
	}
	for _, stage := range []string{"tls error: ", "dial error: ", "server error: "} {
		msg = strings.TrimPrefix(msg, stage)
	}
	return msg
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func without(list []string, s string) []string {
	var out []string
	for _, x := range list {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}

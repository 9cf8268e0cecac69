// Package pgtest starts a real PostgreSQL server for tests: Debian's initdb
// and pg_ctl, a cluster in a temporary directory, a free local TCP port
// outside the kernel's ephemeral range (testnet.FreePort: no connection
// takes it while a Restart stops the server), trust authentication, and
// fresh databases per test. When the tests run as root, the server runs
// as the postgres system user (PostgreSQL refuses to run as root).
//
// One server for a whole package:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//	func TestX(t *testing.T) { url := pgtest.DB(t) ... }
//
// A server of one test's own (to restart it, or to listen on another
// address): srv := pgtest.Start(t, pgtest.Options{}); url := srv.DB(t).
//
// Under CI=true a server that cannot start fails the test; elsewhere the
// test is skipped with the reason.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/powerglide/powerglide/pkg/internal/testnet"
)

// Options configure a server.
type Options struct {
	// Listen is the address to listen on: 127.0.0.1 when empty. A test
	// that simulates several hosts passes the address of a veth.
	Listen string
	// Durable keeps fsync and synchronous commit on (benchmarks that
	// measure what a real server would do). Tests turn them off.
	Durable bool
	// Settings are more postgres -c settings, e.g. "max_connections=300".
	Settings []string
	// HBA are pg_hba.conf lines put before the ones that trust everyone,
	// e.g. "host all alice all scram-sha-256": a test of password
	// authentication gives its role one and the role a password.
	HBA []string
}

// Server is a running PostgreSQL cluster of a test.
type Server struct {
	Dir    string // the temporary directory: data/, sock/, log
	Host   string // the listen address
	Port   int
	bin    string
	cred   *syscall.Credential // the postgres user when run as root
	owner  *os.File            // locked while this process owns the server
	opts   Options
	mu     sync.Mutex
	nextDB atomic.Int64
}

// Bin finds the directory of initdb and pg_ctl: $POWERGLIDE_PG_BIN, the
// newest /usr/lib/postgresql/*/bin (Debian), or PATH.
func Bin() (string, error) {
	if d := os.Getenv("POWERGLIDE_PG_BIN"); d != "" {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err != nil {
			return "", fmt.Errorf("POWERGLIDE_PG_BIN=%s: %w", d, err)
		}
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("initdb not found (install Debian's postgresql package: scripts/test-deps.sh, or set POWERGLIDE_PG_BIN)")
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// NewServer creates and starts a cluster; the caller stops it with Stop.
// It is Start for TestMain and for programs.
func NewServer(opts Options) (*Server, error) {
	bin, err := Bin()
	if err != nil {
		return nil, err
	}
	if opts.Listen == "" {
		opts.Listen = "127.0.0.1"
	}
	reapOrphans()
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	// Whose server it is: the owner holds a lock on ownerFile for as long
	// as it lives, so a run killed before its cleanup leaves it to the
	// next run's reapOrphans. A lock, not a pid: runs in other pid
	// namespaces (containers, unshare) share /tmp and see other pids.
	owner, err := lockOwner(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &Server{Dir: dir, Host: opts.Listen, bin: bin, opts: opts, owner: owner}
	if os.Geteuid() == 0 {
		if s.cred, err = postgresUser(); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	if err := s.initdb(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := s.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// ownerFile is the file whose lock the process that started a server
// holds while it lives.
const ownerFile = "owner.lock"

// orphanAge is how old an unlocked ownerFile must be to count as an
// orphan's: a server being set up has created it but not locked it yet.
const orphanAge = time.Minute

func lockOwner(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, ownerFile), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// reapOrphans stops and removes the servers of test processes that died
// without their cleanup (a test binary killed by its -timeout).
func reapOrphans() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "pgtest-*"))
	for _, dir := range dirs {
		if !orphaned(dir) {
			continue
		}
		s := &Server{Dir: dir}
		var err error
		if s.bin, err = Bin(); err != nil {
			return
		}
		if os.Geteuid() == 0 {
			s.cred, _ = postgresUser()
		}
		s.run("pg_ctl", "stop", "-w", "-t", "30", "-m", "immediate", "-D", s.data())
		os.RemoveAll(dir)
	}
}

// orphaned reports whether dir's owner is gone: its lock is free and it
// was not just created.
func orphaned(dir string) bool {
	f, err := os.Open(filepath.Join(dir, ownerFile))
	if err != nil {
		return false
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || time.Since(fi.ModTime()) < orphanAge {
		return false
	}
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
}

// postgresUser is the credential of the postgres system user.
func postgresUser() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root and there is no postgres user to run the server as: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// run runs a server program as the server's user, with its output in the
// error when it fails.
func (s *Server) run(name string, args ...string) error {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.Dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "TZ=UTC")
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
		cmd.Env = append(cmd.Env, "HOME="+s.Dir)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(lastLines(string(out), 15)))
	}
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (s *Server) data() string   { return filepath.Join(s.Dir, "data") }
func (s *Server) socket() string { return filepath.Join(s.Dir, "sock") }

// Log is the server's log file.
func (s *Server) Log() string { return filepath.Join(s.Dir, "postgres.log") }

func (s *Server) initdb() error {
	if err := os.Mkdir(s.socket(), 0o700); err != nil {
		return err
	}
	if s.cred != nil {
		for _, p := range []string{s.Dir, s.socket()} {
			if err := os.Chown(p, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
				return err
			}
		}
	}
	if err := s.run("initdb", "-D", s.data(), "-U", "postgres", "--auth=trust", "--no-locale", "-E", "UTF8", "--no-sync"); err != nil {
		return err
	}
	// Trust from anywhere: the multi-host test connects from other
	// network namespaces. The server only lives for a test.
	hba := ""
	for _, l := range s.opts.HBA {
		hba += l + "\n"
	}
	hba += "local all all trust\nhost all all 0.0.0.0/0 trust\nhost all all ::/0 trust\n"
	if err := os.WriteFile(filepath.Join(s.data(), "pg_hba.conf"), []byte(hba), 0o600); err != nil {
		return err
	}
	if s.cred != nil {
		return os.Chown(filepath.Join(s.data(), "pg_hba.conf"), int(s.cred.Uid), int(s.cred.Gid))
	}
	return nil
}

// Start starts the server on a free port (the one it had, after Stop).
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	for range 5 { // a free port may be taken between the probe and the start
		if s.Port == 0 {
			if s.Port, err = testnet.FreePort(s.Host); err != nil {
				return err
			}
		}
		settings := []string{
			"listen_addresses='" + s.Host + "'",
			"port=" + strconv.Itoa(s.Port),
			"unix_socket_directories='" + s.socket() + "'",
			"max_connections=300",
			"shared_buffers=32MB",
		}
		if !s.opts.Durable {
			settings = append(settings, "fsync=off", "synchronous_commit=off", "full_page_writes=off")
		}
		settings = append(settings, s.opts.Settings...)
		o := ""
		for _, kv := range settings {
			o += " -c " + kv
		}
		err = s.run("pg_ctl", "start", "-w", "-t", "60", "-D", s.data(), "-l", s.Log(), "-o", o)
		if err == nil {
			return nil
		}
		err = fmt.Errorf("%w\n%s", err, tail(s.Log()))
		s.Port = 0
	}
	return err
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	return lastLines(string(b), 10)
}

// Stop stops the server (fast shutdown: clients are disconnected).
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.run("pg_ctl", "stop", "-w", "-t", "60", "-m", "fast", "-D", s.data())
}

// Kill stops the server the hard way (immediate shutdown, as a crash).
func (s *Server) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.run("pg_ctl", "stop", "-w", "-t", "60", "-m", "immediate", "-D", s.data())
}

// Restart stops the server and starts it again on the same port: clients
// lose their connections and must reconnect.
func (s *Server) Restart() error {
	if err := s.Stop(); err != nil {
		return err
	}
	return s.Start()
}

// Remove stops the server when it runs and deletes its directory.
func (s *Server) Remove() error {
	err := s.Stop()
	if rerr := os.RemoveAll(s.Dir); err == nil {
		err = rerr
	}
	if s.owner != nil {
		s.owner.Close()
	}
	if err != nil && !strings.Contains(err.Error(), "Is server running?") {
		return err
	}
	return nil
}

// URL is a connection URL for database db as the postgres superuser.
func (s *Server) URL(db string) string {
	u := url.URL{Scheme: "postgres", User: url.User("postgres"), Host: net.JoinHostPort(s.Host, strconv.Itoa(s.Port)), Path: "/" + db}
	u.RawQuery = "sslmode=disable"
	return u.String()
}

// CreateDB creates a fresh database and returns its URL.
func (s *Server) CreateDB(ctx context.Context) (string, error) {
	name := fmt.Sprintf("t%d_%d", os.Getpid(), s.nextDB.Add(1))
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return s.URL(name), nil
}

// DropDB drops a database made by CreateDB, disconnecting its clients.
func (s *Server) DropDB(ctx context.Context, dbURL string) error {
	u, err := url.Parse(dbURL)
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+strings.TrimPrefix(u.Path, "/")+" WITH (FORCE)")
	return err
}

// DB creates a fresh database for one test, dropped when the test ends.
func (s *Server) DB(tb testing.TB) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u, err := s.CreateDB(ctx)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.DropDB(ctx, u); err != nil {
			tb.Logf("pgtest: drop database: %v", err)
		}
	})
	return u
}

// Unavailable ends a test that needs a server it cannot have: it fails
// under CI=true, and is skipped elsewhere.
func Unavailable(tb testing.TB, err error) {
	tb.Helper()
	if os.Getenv("CI") == "true" {
		tb.Fatalf("pgtest: cannot start PostgreSQL (CI=true, so this fails): %v", err)
	}
	tb.Skipf("pgtest: cannot start PostgreSQL, skipped (set CI=true to fail instead): %v", err)
}

// Start starts a server for one test, removed when the test ends.
func Start(tb testing.TB, opts Options) *Server {
	tb.Helper()
	s, err := NewServer(opts)
	if err != nil {
		Unavailable(tb, err)
	}
	tb.Cleanup(func() {
		if err := s.Remove(); err != nil {
			tb.Logf("pgtest: remove server: %v", err)
		}
	})
	return s
}

var (
	shared    *Server
	sharedErr error
	inMain    bool
)

// Main starts one server for a package's tests, runs them, and removes
// the server: os.Exit(pgtest.Main(m)) in TestMain. When the server cannot
// start, the tests that ask for it (DB, Shared) fail under CI=true and
// skip elsewhere; the others run.
func Main(m *testing.M) int {
	inMain = true
	shared, sharedErr = NewServer(Options{})
	code := m.Run()
	if shared != nil {
		if err := shared.Remove(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: remove server: %v\n", err)
		}
	}
	return code
}

// Shared returns the package's server (Main's). Without Main, it is a
// server of the test's own (Start), slower but as correct.
func Shared(tb testing.TB) *Server {
	tb.Helper()
	if !inMain {
		return Start(tb, Options{})
	}
	if sharedErr != nil {
		Unavailable(tb, sharedErr)
	}
	return shared
}

// DB returns the URL of a fresh database on the package's server.
func DB(tb testing.TB) string {
	tb.Helper()
	return Shared(tb).DB(tb)
}

// CPU is the CPU time (user and system) the server's processes have used
// so far: the postmaster's, its live children's, and what its exited
// children used. Benchmarks report it per operation; it depends less on
// what else the machine runs than the wall time does.
func (s *Server) CPU() time.Duration {
	b, err := os.ReadFile(filepath.Join(s.data(), "postmaster.pid"))
	if err != nil {
		return 0
	}
	pm, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	ticks := procTicks(pm, true)
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if pid != pm && procParent(pid) == pm {
			ticks += procTicks(pid, false)
		}
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}

// procStat is the fields of /proc/pid/stat after the command's name.
func procStat(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

func procParent(pid int) int {
	f := procStat(pid)
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// procTicks is utime+stime (and cutime+cstime, with children) in clock
// ticks: fields 14 to 17 of /proc/pid/stat, 11 to 14 after the name.
func procTicks(pid int, children bool) int64 {
	f := procStat(pid)
	if len(f) < 15 {
		return 0
	}
	last := 13
	if children {
		last = 15
	}
	var sum int64
	for _, v := range f[11:last] {
		n, _ := strconv.ParseInt(v, 10, 64)
		sum += n
	}
	return sum
}

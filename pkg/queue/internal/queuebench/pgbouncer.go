package main

import (
	"bytes"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/powerglide/powerglide/pkg/internal/testnet"
)

// startPgBouncer runs PgBouncer in session mode in front of the server of
// dbURL, its files in a new directory under dir (which the postgres user
// must reach): each pg-queue process then borrows a server connection that is
// already there (no fork, warm caches) instead of opening its own. It
// returns the URL of the database through the pooler and a stop function.
// PgBouncer refuses to run as root: as root it runs as the postgres user.
func startPgBouncer(dir, dbURL string) (string, func(), error) {
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/pgbouncer"); serr != nil {
			return "", nil, fmt.Errorf("pgbouncer not found (Debian package pgbouncer): %w", err)
		}
		bin = "/usr/sbin/pgbouncer"
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		return "", nil, err
	}
	port, err := testnet.FreePort("127.0.0.1") // pgbouncer binds it later
	if err != nil {
		return "", nil, err
	}
	dir, err = os.MkdirTemp(dir, "pgbouncer-")
	if err != nil {
		return "", nil, err
	}
	ini := fmt.Sprintf(`[databases]
* = host=%s port=%s
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = session
server_reset_query = DISCARD ALL
max_client_conn = 500
default_pool_size = 40
logfile = %s
`, u.Hostname(), u.Port(), port, filepath.Join(dir, "users.txt"), filepath.Join(dir, "pgbouncer.log"))
	files := map[string]string{"pgbouncer.ini": ini, "users.txt": `"` + u.User.Username() + `" ""` + "\n"}
	cmd := exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		pu, err := user.Lookup("postgres")
		if err != nil {
			return "", nil, fmt.Errorf("pgbouncer cannot run as root and there is no postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(pu.Uid)
		gid, _ := strconv.Atoi(pu.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			return "", nil, err
		}
	}
	if cred != nil {
		for _, p := range []string{dir, filepath.Join(dir, "pgbouncer.ini"), filepath.Join(dir, "users.txt")} {
			if err := os.Chown(p, int(cred.Uid), int(cred.Gid)); err != nil {
				return "", nil, err
			}
		}
	}
	var errs bytes.Buffer
	cmd.Stderr = &errs
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			stop()
			log, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.log"))
			return "", nil, fmt.Errorf("pgbouncer did not listen on port %d: %s%s", port, errs.Bytes(), log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	via := *u
	via.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	return via.String(), stop, nil
}

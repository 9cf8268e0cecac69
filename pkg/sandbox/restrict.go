package sandbox

import (
	"errors"
	"fmt"
	"runtime"
	"syscall"
	"unsafe"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// restrictThread applies the plan to the calling OS thread, which must be
// locked and never unlocked: no capabilities, no_new_privs, the Landlock
// domain and the seccomp filter. Processes the thread starts inherit them
// all. With keep >= 0 the thread itself keeps that capability; it reports
// whether it did.
func (pl *plan) restrictThread(keep int) (bool, error) {
	kept, err := dropCaps(keep)
	if err != nil {
		return false, err
	}
	return kept, pl.restrictRest()
}

func (pl *plan) restrictRest() error {
	fd, flags, err := pl.cfg.NewRulesetFD(pl.rules...)
	if err != nil {
		return fmt.Errorf("landlock ruleset: %w", err)
	}
	if fd < 0 {
		return errors.New("landlock ruleset: nothing to enforce")
	}
	defer unix.Close(fd)
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if err := ll.LandlockRestrictSelf(fd, flags); err != nil {
		return fmt.Errorf("landlock_restrict_self: %w", err)
	}
	prog := unix.SockFprog{Len: uint16(len(pl.filter)), Filter: &pl.filter[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&prog)), 0, 0); err != nil {
		return fmt.Errorf("seccomp filter: %w", err)
	}
	return nil
}

// seccompAvailable reports whether the kernel takes seccomp filters.
func seccompAvailable() bool {
	_, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0)
	return err == nil
}

// auditArch is the seccomp architecture of this build.
func auditArch() (uint32, bool) {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64, true
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64, true
	}
	return 0, false
}

// seccompFilter builds the filter: syscalls of another architecture (the
// 32-bit ABIs, whose socketcall would slip past) fail; io_uring fails (its
// operations bypass seccomp); the kernel keyring, where the user's keys may
// be, is out of reach; without allowNet, socket() fails for every
// family but netlink, so no TCP, UDP, raw or unix socket can be made
// (socketpair still works: it reaches no one).
func seccompFilter(allowNet bool) ([]unix.SockFilter, error) {
	arch, ok := auditArch()
	if !ok {
		return nil, fmt.Errorf("no seccomp filter is written for %s", runtime.GOARCH)
	}
	const (
		ldw   = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge   = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		ret   = unix.BPF_RET | unix.BPF_K
		allow = unix.SECCOMP_RET_ALLOW
		eperm = unix.SECCOMP_RET_ERRNO | uint32(syscall.EPERM)
		eacc  = unix.SECCOMP_RET_ERRNO | uint32(syscall.EACCES)
		// offsets in struct seccomp_data
		offNr, offArch, offArg0 = 0, 4, 16
	)
	stmt := func(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }
	jump := func(k uint32, jt, jf uint8) unix.SockFilter { return unix.SockFilter{Code: jeq, Jt: jt, Jf: jf, K: k} }
	f := []unix.SockFilter{
		stmt(ldw, offArch),
		jump(arch, 1, 0),
		stmt(ret, eperm),
		stmt(ldw, offNr),
		{Code: jge, Jt: 0, Jf: 1, K: 0x40000000}, // the x32 ABI
		stmt(ret, eperm),
		jump(unix.SYS_IO_URING_SETUP, 5, 0),
		jump(unix.SYS_IO_URING_ENTER, 4, 0),
		jump(unix.SYS_IO_URING_REGISTER, 3, 0),
		jump(unix.SYS_KEYCTL, 2, 0), // the user's kernel keyring
		jump(unix.SYS_ADD_KEY, 1, 0),
		jump(unix.SYS_REQUEST_KEY, 0, 1),
		stmt(ret, eperm),
	}
	if !allowNet {
		f = append(f,
			jump(unix.SYS_SOCKET, 0, 3),
			stmt(ldw, offArg0),
			jump(unix.AF_NETLINK, 1, 0),
			stmt(ret, eacc),
		)
	}
	return append(f, stmt(ret, allow)), nil
}

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

// arch is what the filter needs to know of this build's architecture.
type arch struct {
	audit uint32 // its AUDIT_ARCH_* value
	// chmod and chown are the syscalls, beyond the *at forms every
	// architecture has, that change a file's mode or owner by path: amd64
	// keeps chmod (90), chown (92) and lchown (94); arm64 has none.
	chmod, chown []uint32
}

// thisArch is the architecture of this build, if the filter knows it.
func thisArch() (arch, bool) {
	switch runtime.GOARCH {
	case "amd64":
		return arch{audit: unix.AUDIT_ARCH_X86_64, chmod: []uint32{90}, chown: []uint32{92, 94}}, true
	case "arm64":
		return arch{audit: unix.AUDIT_ARCH_AARCH64}, true
	}
	return arch{}, false
}

// BPF instructions and offsets in struct seccomp_data.
const (
	ldw    = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	jeq    = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	jge    = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	jset   = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	and    = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
	ret    = unix.BPF_RET | unix.BPF_K
	allow  = unix.SECCOMP_RET_ALLOW
	eperm  = unix.SECCOMP_RET_ERRNO | uint32(syscall.EPERM)
	eacces = unix.SECCOMP_RET_ERRNO | uint32(syscall.EACCES)

	offNr, offArch = 0, 4
)

// offArg is the offset of the low 32 bits of argument i (both
// architectures are little-endian): modes, ids, families and types are
// 32 bits or less, and the kernel drops the rest.
func offArg(i int) uint32 { return 16 + 8*uint32(i) }

func stmt(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }
func jump(code uint16, k uint32, jt, jf uint8) unix.SockFilter {
	return unix.SockFilter{Code: code, Jt: jt, Jf: jf, K: k}
}

// Each block below starts and ends with the syscall number in the
// accumulator and jumps only within itself, so blocks can follow one
// another in any order.

// failCalls fails the syscalls nrs with errno.
func failCalls(errno uint32, nrs ...uint32) []unix.SockFilter {
	n := len(nrs)
	var b []unix.SockFilter
	for i, nr := range nrs {
		b = append(b, jump(jeq, nr, uint8(n-i), 0))
	}
	return append(b, jump(unix.BPF_JMP|unix.BPF_JA, 1, 0, 0), stmt(ret, errno))
}

// failModeBits fails syscall nr with errno when its argument arg has a bit
// of mask set.
func failModeBits(nr uint32, arg int, mask, errno uint32) []unix.SockFilter {
	return []unix.SockFilter{
		jump(jeq, nr, 0, 4),
		stmt(ldw, offArg(arg)),
		jump(jset, mask, 0, 1),
		stmt(ret, errno),
		stmt(ldw, offNr),
	}
}

// failOwnerChange fails syscall nr with errno unless its owner (argument
// arg) and group (arg+1) are each -1 (unchanged) or the caller's own: so
// no file gets another owner or group, while a copy that keeps its owner
// (cp -a, tar as root) still works.
func failOwnerChange(nr uint32, arg int, uid, gid, errno uint32) []unix.SockFilter {
	const unchanged = 0xffffffff
	return []unix.SockFilter{
		jump(jeq, nr, 0, 9),
		stmt(ldw, offArg(arg)),
		jump(jeq, unchanged, 2, 0),
		jump(jeq, uid, 1, 0),
		stmt(ret, errno),
		stmt(ldw, offArg(arg+1)),
		jump(jeq, unchanged, 2, 0),
		jump(jeq, gid, 1, 0),
		stmt(ret, errno),
		stmt(ldw, offNr),
	}
}

// failUnlessArg fails syscall nr with errno unless its argument arg, masked,
// is one of allowed.
func failUnlessArg(nr uint32, arg int, mask uint32, allowed []uint32, errno uint32) []unix.SockFilter {
	n := len(allowed)
	b := []unix.SockFilter{
		jump(jeq, nr, 0, uint8(n+4)),
		stmt(ldw, offArg(arg)),
		stmt(and, mask),
	}
	for i, v := range allowed {
		b = append(b, jump(jeq, v, uint8(n-i), 0))
	}
	return append(b, stmt(ret, errno), stmt(ldw, offNr))
}

// seccompFilter builds the filter; uid and gid are the commands' own.
//   - Syscalls of another architecture (the 32-bit ABIs, whose socketcall
//     would slip past) fail.
//   - io_uring fails (its operations bypass seccomp), and so does the
//     kernel keyring, where the user's keys may be.
//   - No file gets the setuid or setgid bit (chmod and its kin fail with
//     such a mode): Landlock has no right for chmod, and a root command
//     could otherwise make a setuid-root program anywhere for every local
//     user. No file gets another owner or group either.
//   - socket() fails for every family but netlink, and with allowNet but
//     netlink, IPv4 and IPv6: never a unix socket, which Landlock does not
//     check by path (a pty holder or store agent under the hidden data
//     root would answer it).
//   - socketpair() makes only stream and seqpacket pairs: a datagram one
//     (SOCK_RAW is one too, for AF_UNIX) can be re-addressed with sendto
//     to any datagram socket of the machine.
func seccompFilter(allowNet bool, uid, gid uint32) ([]unix.SockFilter, error) {
	a, ok := thisArch()
	if !ok {
		return nil, fmt.Errorf("no seccomp filter is written for %s", runtime.GOARCH)
	}
	f := []unix.SockFilter{
		stmt(ldw, offArch),
		jump(jeq, a.audit, 1, 0),
		stmt(ret, eperm),
		stmt(ldw, offNr),
		jump(jge, 0x40000000, 0, 1), // the x32 ABI
		stmt(ret, eperm),
	}
	f = append(f, failCalls(eperm, unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
		unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY)...)

	const setid = unix.S_ISUID | unix.S_ISGID
	for _, nr := range a.chmod {
		f = append(f, failModeBits(nr, 1, setid, eperm)...)
	}
	f = append(f, failModeBits(unix.SYS_FCHMOD, 1, setid, eperm)...)
	f = append(f, failModeBits(unix.SYS_FCHMODAT, 2, setid, eperm)...)
	f = append(f, failModeBits(unix.SYS_FCHMODAT2, 2, setid, eperm)...)
	for _, nr := range a.chown {
		f = append(f, failOwnerChange(nr, 1, uid, gid, eperm)...)
	}
	f = append(f, failOwnerChange(unix.SYS_FCHOWN, 1, uid, gid, eperm)...)
	f = append(f, failOwnerChange(unix.SYS_FCHOWNAT, 2, uid, gid, eperm)...)

	families := []uint32{unix.AF_NETLINK}
	if allowNet {
		families = append(families, unix.AF_INET, unix.AF_INET6)
	}
	f = append(f, failUnlessArg(unix.SYS_SOCKET, 0, 0xffffffff, families, eacces)...)
	f = append(f, failUnlessArg(unix.SYS_SOCKETPAIR, 1, 0xf, []uint32{unix.SOCK_STREAM, unix.SOCK_SEQPACKET}, eacces)...)
	return append(f, stmt(ret, allow)), nil
}

package sandbox

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Securebits that make uid 0 an ordinary user across exec: no capabilities
// granted for being root, none raised as ambient, locked so that no child
// can unset them.
const secureBits = 1<<0 | 1<<1 | // SECBIT_NOROOT, _LOCKED
	1<<5 | // SECBIT_KEEP_CAPS_LOCKED (unset)
	1<<6 | 1<<7 // SECBIT_NO_CAP_AMBIENT_RAISE, _LOCKED

// dropCaps takes every capability away from the calling thread and from
// what it execs, keeping keep (-1: none) in the thread's own effective set:
// CAP_SYS_ADMIN lets a root launcher make a PID namespace without a user
// namespace. It reports whether the thread holds keep afterwards.
//
// A program root starts otherwise gets every capability back at exec (and
// with CAP_SYS_MODULE could load kernel code); no_new_privs does not
// prevent that.
func dropCaps(keep int) (bool, error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false, fmt.Errorf("capget: %w", err)
	}
	has := func(c int) bool { return data[c/32].Effective&(1<<(c%32)) != 0 }
	root := os.Geteuid() == 0
	if !root && data[0].Permitted == 0 && data[1].Permitted == 0 && data[0].Inheritable == 0 && data[1].Inheritable == 0 {
		return false, nil // an ordinary user: nothing to give up
	}
	if has(unix.CAP_SETPCAP) {
		if err := unix.Prctl(unix.PR_SET_SECUREBITS, secureBits, 0, 0, 0); err != nil {
			return false, fmt.Errorf("securebits: %w", err)
		}
		for c := 0; c <= unix.CAP_LAST_CAP; c++ {
			if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
				return false, fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
			}
		}
	} else if root {
		return false, errors.New("cannot drop root's capabilities (CAP_SETPCAP is missing)")
	}
	_ = unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
	kept := keep >= 0 && has(keep)
	data = [2]unix.CapUserData{}
	if kept {
		data[keep/32].Effective = 1 << (keep % 32)
		data[keep/32].Permitted = 1 << (keep % 32)
	}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return false, fmt.Errorf("capset: %w", err)
	}
	return kept, nil
}

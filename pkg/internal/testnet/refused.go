// Package testnet gives tests local TCP addresses that misbehave as a
// server can: one where connections are refused (Refused) and one that
// accepts them and never answers (Silent).
package testnet

import (
	"fmt"
	"net"
	"syscall"
)

// Refused reserves a port on 127.0.0.1 that nothing listens on: a
// connection to it is refused until release, and no other socket can bind
// it meanwhile. (A listener's port closed again is free for any test
// running alongside to take, and then connections to it succeed.) The
// socket is bound, never listening, and not inherited by child
// processes.
func Refused() (addr string, release func(), err error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return "", nil, fmt.Errorf("refused address: socket: %w", err)
	}
	// No SO_REUSEADDR: a listener that sets it cannot share the port.
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		syscall.Close(fd)
		return "", nil, fmt.Errorf("refused address: bind: %w", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		syscall.Close(fd)
		return "", nil, fmt.Errorf("refused address: getsockname: %w", err)
	}
	port := sa.(*syscall.SockaddrInet4).Port
	return net.JoinHostPort("127.0.0.1", fmt.Sprint(port)), func() { syscall.Close(fd) }, nil
}

package proc

import "syscall"

func syscallGetpgid() (int, error) { return syscall.Getpgid(0) }

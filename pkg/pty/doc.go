// Package pty runs programs under pseudo-terminals for pg-pty: one-shot
// runs that stream output and pass the child's exit status through, and
// sessions that outlive a call. A session is a directory under
// $POWERGLIDE_HOME/pty/<name>/ owned by a detached holder process: it keeps
// the terminal's master side, appends everything the program prints to
// output.log, keeps a VT emulator of the screen, records its state in
// session.json (replaced atomically) and takes input and requests on a unix
// socket (sock) in the same directory.
package pty

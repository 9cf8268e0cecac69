package tool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/powerglide/powerglide/pkg/atomicfile"
)

// Opening a FIFO for reading blocks until a writer comes, and reading a
// device or a FIFO never ends: read and edit would hang the whole server on
// one. So files are opened with O_NONBLOCK (the open itself cannot block)
// and O_NOCTTY, and the opened descriptor is checked with fstat: no window
// between a check and the open for another file to take the name.
const openReadFlags = os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_NOCTTY

// openRegular opens r (relative to the root) for reading and refuses
// anything but a regular file. shown is the path as the model wrote it.
func (s *Session) openRegular(shown, r string) (*os.File, error) {
	f, err := s.root.OpenFile(r, openReadFlags, 0)
	if err != nil {
		if errors.Is(err, syscall.ENXIO) {
			// open(2) of a unix socket, or of a device without a driver.
			return nil, notRegular(shown, "a socket or a device")
		}
		return nil, s.pathErr(shown, err)
	}
	if err := checkRegular(f, shown); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// checkRegular refuses an opened file that is not a regular file.
func checkRegular(f *os.File, shown string) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%s: %w", shown, err)
	}
	switch m := fi.Mode(); {
	case m.IsRegular():
		return nil
	case m.IsDir():
		return fmt.Errorf("%s is a directory; use ls to list it", shown)
	default:
		return notRegular(shown, atomicfile.Kind(m))
	}
}

func notRegular(shown, what string) error {
	return fmt.Errorf("%s is %s, not a regular file: read, write and edit only work on regular files (use bash for others)", shown, what)
}

// readRegular reads a whole regular file inside the root, stopping when ctx ends.
func (s *Session) readRegular(ctx context.Context, shown, r string) ([]byte, error) {
	f, err := s.openRegular(shown, r)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(ctxReader{ctx, f})
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, s.pathErr(shown, err)
	}
	return b, nil
}

// ctxReader ends a read loop once ctx is done: a huge file on a slow disk
// must not outlive a cancelled call.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, context.Cause(c.ctx)
	}
	return c.r.Read(p)
}

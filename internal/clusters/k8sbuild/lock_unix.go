//go:build unix

package k8sbuild

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"
)

// lock takes an exclusive advisory lock on path, waiting for other holders while
// ctx allows. The lock dies with the process, so a killed build never leaves it
// held.
func lock(ctx context.Context, path string, progress io.Writer) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	var waiting, told time.Time
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				_ = f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		// A line at once, then one every 20 s while it lasts.
		switch now := time.Now(); {
		case waiting.IsZero():
			waiting, told = now, now
			fmt.Fprintf(progress, "vigil: another process is building the control plane; waiting for it (lock %s)\n", path)
		case now.Sub(told) >= 20*time.Second:
			told = now
			fmt.Fprintf(progress, "vigil: still waiting for the other build, %s so far\n", now.Sub(waiting).Round(time.Second))
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("wait for the control-plane build lock %s: %w", path, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

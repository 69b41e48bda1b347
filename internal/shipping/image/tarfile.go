package image

import (
	"archive/tar"
	"io"
	"time"
)

// tarWriter writes entries that depend on nothing but their name, mode and
// content: one time, owner root, no user or group names. It keeps the first
// error and reports it from close.
type tarWriter struct {
	tw    *tar.Writer
	epoch time.Time
	err   error
}

func newTar(w io.Writer, epoch time.Time) *tarWriter {
	return &tarWriter{tw: tar.NewWriter(w), epoch: epoch}
}

func (t *tarWriter) header(h *tar.Header) {
	h.ModTime, h.AccessTime, h.ChangeTime = t.epoch, time.Time{}, time.Time{}
	h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
	h.Format = tar.FormatPAX
	if t.err == nil {
		t.err = t.tw.WriteHeader(h)
	}
}

func (t *tarWriter) dir(name string) {
	t.header(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755})
}

func (t *tarWriter) file(name string, mode int64, data []byte) {
	t.header(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data))})
	if t.err == nil {
		_, t.err = t.tw.Write(data)
	}
}

// copy writes a file of size bytes read from r.
func (t *tarWriter) copy(name string, mode int64, size int64, r io.Reader) {
	t.header(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: size})
	if t.err == nil {
		_, t.err = io.CopyN(t.tw, r, size)
	}
}

func (t *tarWriter) close() error {
	if t.err != nil {
		return t.err
	}
	return t.tw.Close()
}

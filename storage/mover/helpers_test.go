package mover

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// makeTree writes a tree of random data under dir: a large file, small
// and empty files, nested and empty directories, symlinks (relative,
// absolute, dangling, to a directory), varied modes (read-only files and
// directories, setgid, sticky) and, when running as root, other owners.
func makeTree(t testing.TB, dir string, large int64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	write := func(rel string, size int64, mode fs.FileMode) {
		t.Helper()
		p := filepath.Join(dir, rel)
		must(os.MkdirAll(filepath.Dir(p), 0o755))
		f, err := os.Create(p)
		must(err)
		_, err = io.CopyN(f, randReader{rng}, size)
		must(err)
		must(f.Close())
		must(os.Chmod(p, mode))
	}
	write("big.bin", large, 0o644)
	// Small files of up to 200 KiB, or of up to 64 bytes in a small tree.
	part := int64(200 << 10)
	if large < 1<<20 {
		part = 64
	}
	for i := range 20 {
		write(fmt.Sprintf("data/part-%02d", i), rng.Int64N(part), 0o640)
	}
	write("data/empty", 0, 0o600)
	write("data/exec.sh", 100, 0o755)
	write("data/deep/er/still/file.txt", 4096, 0o444)
	write("name with spaces and ünïcödé", 10, 0o604)
	write(filepath.Join("long", string(bytes.Repeat([]byte("d"), 120)), string(bytes.Repeat([]byte("f"), 200))), 77, 0o600)
	must(os.MkdirAll(filepath.Join(dir, "empty-dir", "nested-empty"), 0o755))
	must(os.Mkdir(filepath.Join(dir, "sticky"), 0o755))
	must(os.Chmod(filepath.Join(dir, "sticky"), fs.ModeSticky|0o777))
	must(os.Mkdir(filepath.Join(dir, "setgid"), 0o755))
	must(os.Chmod(filepath.Join(dir, "setgid"), fs.ModeSetgid|0o750))
	write("readonly-dir/inside", 5, 0o600)
	must(os.Chmod(filepath.Join(dir, "readonly-dir"), 0o555))
	must(os.Symlink("big.bin", filepath.Join(dir, "link-rel")))
	must(os.Symlink("/etc/passwd", filepath.Join(dir, "link-abs")))
	must(os.Symlink("does/not/exist", filepath.Join(dir, "link-dangling")))
	must(os.Symlink("../data", filepath.Join(dir, "empty-dir", "link-dir")))
	if os.Geteuid() == 0 {
		must(os.Lchown(filepath.Join(dir, "data", "part-03"), 1234, 5678))
		must(os.Lchown(filepath.Join(dir, "link-rel"), 4321, 8765))
		must(os.Lchown(filepath.Join(dir, "empty-dir"), 99, 98))
	}
	old := time.Date(2020, 2, 3, 4, 5, 6, 789000000, time.UTC)
	must(os.Chtimes(filepath.Join(dir, "data", "part-07"), old, old))
	must(os.Chtimes(filepath.Join(dir, "empty-dir", "nested-empty"), old, old))
	must(os.Chmod(dir, 0o750))
}

type randReader struct{ r *rand.Rand }

func (r randReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r.r.Uint32())
	}
	return len(p), nil
}

// entryInfo is what compareTrees compares of an entry.
type entryInfo struct {
	mode     fs.FileMode
	size     int64
	target   string
	uid, gid uint32
	mtime    time.Time
}

func listTree(t testing.TB, dir string) map[string]entryInfo {
	t.Helper()
	out := map[string]entryInfo{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		e := entryInfo{mode: info.Mode(), mtime: info.ModTime()}
		st := info.Sys().(*syscall.Stat_t)
		e.uid, e.gid = st.Uid, st.Gid
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			e.target, err = os.Readlink(p)
		case info.Mode().IsRegular():
			e.size = info.Size()
		}
		out[rel] = e
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// compareTrees fails t unless dst holds what src holds: the same entries,
// kinds, modes, sizes, contents, symlink targets and mtimes, and the same
// owners when running as root.
func compareTrees(t testing.TB, src, dst string) {
	t.Helper()
	a, b := listTree(t, src), listTree(t, dst)
	if len(a) != len(b) {
		t.Errorf("%d entries in the source, %d copied", len(a), len(b))
	}
	for rel, ea := range a {
		eb, ok := b[rel]
		if !ok {
			t.Errorf("%s: not copied", rel)
			continue
		}
		if os.Geteuid() != 0 {
			ea.uid, ea.gid, eb.uid, eb.gid = 0, 0, 0, 0
		}
		if !ea.mtime.Equal(eb.mtime) {
			t.Errorf("%s: mtime %v, copied %v", rel, ea.mtime, eb.mtime)
		}
		ea.mtime, eb.mtime = time.Time{}, time.Time{}
		if ea != eb {
			t.Errorf("%s: %+v, copied %+v", rel, ea, eb)
		}
		if ea.mode.IsRegular() {
			if !sameContent(t, filepath.Join(src, rel), filepath.Join(dst, rel)) {
				t.Errorf("%s: content differs", rel)
			}
		}
	}
}

func sameContent(t testing.TB, a, b string) bool {
	t.Helper()
	fa, err := os.Open(a)
	if err != nil {
		t.Fatal(err)
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	ba, bb := make([]byte, 1<<16), make([]byte, 1<<16)
	for {
		na, ea := io.ReadFull(fa, ba)
		nb, eb := io.ReadFull(fb, bb)
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			return false
		}
		if ea != nil || eb != nil {
			return errors.Is(ea, eb) || (isEOF(ea) && isEOF(eb))
		}
	}
}

func isEOF(err error) bool { return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) }

// startServer serves dir on 127.0.0.1 until the test ends.
func startServer(t testing.TB, s *Server) string {
	t.Helper()
	ln, err := Listen(t.Context(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// startRelay relays 127.0.0.1:<port> to to until the test ends.
func startRelay(t testing.TB, to string) string {
	t.Helper()
	ln, err := Listen(t.Context(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- (&Relay{To: to}).Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("relay: %v", err)
		}
	})
	return ln.Addr().String()
}

// cutter is a TCP proxy on 127.0.0.1 in front of to that passes at most
// limit bytes from the server to the client, then either cuts both
// connections (stall false) or passes nothing more, keeping both open and
// reading nothing from the server, until release (stall true), after which
// it passes everything.
type cutter struct {
	ln       net.Listener
	to       string
	limit    atomic.Int64
	stall    bool
	passed   atomic.Int64
	reached  chan struct{}
	once     sync.Once
	mu       sync.Mutex
	conns    []net.Conn
	released chan struct{}
	relOnce  sync.Once
}

func startCutter(t testing.TB, to string, limit int64, stall bool) *cutter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{ln: ln, to: to, stall: stall, reached: make(chan struct{}), released: make(chan struct{})}
	c.limit.Store(limit)
	go c.serve()
	t.Cleanup(func() { ln.Close(); c.release(); c.closeAll() })
	return c
}

func (c *cutter) addr() string { return c.ln.Addr().String() }

func (c *cutter) release() { c.relOnce.Do(func() { close(c.released) }) }

func (c *cutter) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		conn.Close()
	}
}

func (c *cutter) serve() {
	for {
		in, err := c.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", c.to)
		if err != nil {
			in.Close()
			continue
		}
		c.mu.Lock()
		c.conns = append(c.conns, in, out)
		c.mu.Unlock()
		go func() { _, _ = io.Copy(out, in) }()
		go c.down(in, out)
	}
}

func (c *cutter) down(in, out net.Conn) {
	defer in.Close()
	defer out.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := out.Read(buf)
		for n > 0 {
			m := min(int64(n), max(c.limit.Load()-c.passed.Load(), 0))
			if m > 0 {
				if _, werr := in.Write(buf[:m]); werr != nil {
					return
				}
				c.passed.Add(m)
			}
			copy(buf, buf[m:n])
			n -= int(m)
			if n > 0 || c.passed.Load() >= c.limit.Load() {
				c.once.Do(func() { close(c.reached) })
				if !c.stall {
					return
				}
				<-c.released
				c.limit.Store(1 << 62)
			}
		}
		if err != nil {
			return
		}
	}
}

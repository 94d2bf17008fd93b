package mover

import (
	"archive/tar"
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Fetcher copies the tree a Server serves into Dir.
type Fetcher struct {
	// Dir is emptied, then filled.
	Dir string
	// From is the server's (or a relay's) HOST:PORT.
	From string
	// Token is presented to the server (TokenEnv).
	Token string
	// Progress gets a Progress line every ProgressInterval (default 1 s)
	// and one when the copy ends; nil: none.
	Progress         io.Writer
	ProgressInterval time.Duration
	// ConnectTimeout bounds the time spent reaching From before the copy
	// starts (the server's pod may start after this one); default 2 min.
	ConnectTimeout time.Duration
	// IdleTimeout ends the copy when nothing arrives for that long once it
	// has started (a hung serve, a cut tunnel); default 2 min.
	IdleTimeout time.Duration
	Log         *slog.Logger

	// afterExtract, when set (tests), runs after the tree is written and
	// before it is verified.
	afterExtract func()
}

// Fetch empties Dir, copies the served tree into it, and verifies it: the
// digest of what was written, read back from Dir, must equal the source's.
// It returns the copy's Result, or why it failed; a failed or interrupted
// Fetch leaves Dir incomplete (the next one empties it first).
func (f *Fetcher) Fetch(ctx context.Context) (Result, error) {
	if f.Log == nil {
		f.Log = slog.New(slog.DiscardHandler)
	}
	if f.ProgressInterval <= 0 {
		f.ProgressInterval = time.Second
	}
	if f.ConnectTimeout <= 0 {
		f.ConnectTimeout = 2 * time.Minute
	}
	if f.IdleTimeout <= 0 {
		f.IdleTimeout = 2 * time.Minute
	}
	if err := emptyDir(f.Dir); err != nil {
		return Result{}, err
	}
	f.Log.Info("emptied", "dir", f.Dir)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	resp, err := f.connect(ctx)
	if err != nil {
		return Result{}, err
	}
	defer resp.Body.Close()
	total, _ := strconv.ParseInt(resp.Header.Get(headerTotalBytes), 10, 64)
	f.Log.Info("copying", "from", f.From, "totalBytes", total, "files", resp.Header.Get(headerFiles))

	p := &progress{total: max(total, 0), start: time.Now(), out: f.Progress}
	// Lines go on while the copy is verified, at the copy's final count.
	stop := p.every(f.ProgressInterval)
	defer stop()
	x := &extractor{dir: f.Dir, counted: &p.bytes, chown: os.Geteuid() == 0}
	err = x.extract(resp.Body)
	p.copied()
	p.print()
	if err != nil {
		// serve says why it stopped, if it could.
		if reason := drainTrailer(resp, trailerError); reason != "" {
			return Result{}, fmt.Errorf("copy from %s: the source failed: %s", f.From, reason)
		}
		var ne net.Error
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &ne) || errors.Is(err, syscall.ECONNRESET) {
			return Result{}, fmt.Errorf("copy from %s: the connection was lost after %d bytes: %w", f.From, p.bytes.Load(), err)
		}
		return Result{}, fmt.Errorf("copy from %s: %w", f.From, err)
	}
	if f.afterExtract != nil {
		f.afterExtract()
	}

	// Read back what was written while serve reads the source again.
	var wg sync.WaitGroup
	var written Sum
	var werr error
	wg.Go(func() { written, werr = treeDigest(ctx, f.Dir) })
	_, rerr := io.Copy(io.Discard, resp.Body)
	if rerr != nil {
		cancel() // no digest to compare with: stop reading back
	}
	wg.Wait()
	if rerr != nil {
		return Result{}, fmt.Errorf("copy from %s: waiting for the source's digest: %w", f.From, rerr)
	}
	if werr != nil {
		return Result{}, fmt.Errorf("verify: %w", werr)
	}
	if reason := resp.Trailer.Get(trailerError); reason != "" {
		return Result{}, fmt.Errorf("copy from %s: the source failed: %s", f.From, reason)
	}
	src, sent := resp.Trailer.Get(trailerSHA256), resp.Trailer.Get(trailerSentSHA256)
	if src == "" {
		return Result{}, fmt.Errorf("copy from %s: %w", f.From, errNoDigest)
	}
	if written.SHA256 != src {
		why := "what was written differs from what was sent"
		if sent != src {
			why = "the source changed during the copy (is a pod still writing to it?)"
		}
		return Result{}, fmt.Errorf("digest mismatch: sha256 of %s is %s, of the source %s: %s", f.Dir, written.SHA256, src, why)
	}
	r := Result{Bytes: written.Bytes, Files: written.Files, SHA256: written.SHA256}
	f.Log.Info("copied and verified", "bytes", r.Bytes, "files", r.Files, "sha256", r.SHA256, "duration", time.Since(p.start).Round(time.Millisecond).String())
	return r, nil
}

// connect GETs the tree, trying again until ConnectTimeout while From
// cannot be reached or does not answer 200.
func (f *Fetcher) connect(ctx context.Context) (*http.Response, error) {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAliveConfig: keepAlive}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &idleConn{Conn: c, idle: f.IdleTimeout}, nil
	}
	client := &http.Client{Transport: &http.Transport{
		DialContext:        dial,
		DisableCompression: true,
		Proxy:              nil,
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+f.From+treePath, nil)
	if err != nil {
		return nil, fmt.Errorf("--from %q: %w", f.From, err)
	}
	if f.Token != "" {
		req.Header.Set("Authorization", "Bearer "+f.Token)
	}
	deadline := time.Now().Add(f.ConnectTimeout)
	for {
		resp, err := client.Do(req)
		if err == nil && resp.StatusCode == http.StatusOK {
			return resp, nil
		}
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
			resp.Body.Close()
			err = fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
			if resp.StatusCode == http.StatusUnauthorized {
				// Trying again will not help.
				return nil, fmt.Errorf("%s refused this fetch: %w (is %s the same on both sides?)", f.From, err, TokenEnv)
			}
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return nil, fmt.Errorf("reach %s (tried for %s): %w", f.From, f.ConnectTimeout, err)
		}
		f.Log.Info("cannot reach the source yet", "from", f.From, "err", err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("reach %s: %w", f.From, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// drainTrailer reads what is left of resp's body (briefly) and returns the
// trailer named.
func drainTrailer(resp *http.Response, name string) string {
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
	return resp.Trailer.Get(name)
}

// progress prints Progress lines.
type progress struct {
	bytes atomic.Int64
	total int64
	start time.Time
	out   io.Writer
	mu    sync.Mutex
	end   time.Time // when the copy ended; zero before
}

// copied marks the end of the copy: the rate is the copy's from then on.
func (p *progress) copied() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.end = time.Now()
}

func (p *progress) every(d time.Duration) (stop func()) {
	return tick(d, func() bool { p.print(); return true })
}

// tick calls f every d until f returns false or stop is called; stop
// returns once f is no longer running and may be called more than once.
func tick(d time.Duration, f func() bool) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if !f() {
					return
				}
			}
		}
	})
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

func (p *progress) now() Progress {
	n := p.bytes.Load()
	pr := Progress{Bytes: n, TotalBytes: max(p.total, n), ETASeconds: -1}
	p.mu.Lock()
	end := p.end
	p.mu.Unlock()
	copied := !end.IsZero()
	if !copied {
		end = time.Now()
	}
	if secs := end.Sub(p.start).Seconds(); secs > 0 && n > 0 {
		rate := float64(n) / secs
		pr.BytesPerSecond = int64(rate)
		pr.ETASeconds = int64(float64(pr.TotalBytes-n)/rate + 0.5)
	}
	if copied {
		pr.ETASeconds = 0
	}
	return pr
}

func (p *progress) print() {
	if p.out == nil {
		return
	}
	line, _ := json.Marshal(p.now())
	p.mu.Lock()
	defer p.mu.Unlock()
	_, _ = p.out.Write(append(line, '\n'))
}

// emptyDir removes everything in dir, keeping dir (a volume's mount
// point), even directories a copy left without write permission.
func emptyDir(dir string) error {
	info, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("--dir: %w", err)
	}
	if !info.IsDir() {
		return fmt.Errorf("--dir %s is not a directory", dir)
	}
	if abs, err := filepath.Abs(dir); err != nil || abs == "/" {
		return fmt.Errorf("--dir %s: refusing to empty the root directory", dir)
	}
	removeAll := func() error {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
		return nil
	}
	if removeAll() == nil {
		return nil
	}
	// A directory without write permission (kept from the source) stops
	// a non-root RemoveAll: open them all up, and try again.
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(path, 0o700)
		}
		return nil
	})
	if err := removeAll(); err != nil {
		return fmt.Errorf("empty --dir %s: %w", dir, err)
	}
	return nil
}

// extractor writes a tar stream from serve under dir, refusing any entry
// that would land outside it.
type extractor struct {
	dir     string
	counted *atomic.Int64
	chown   bool
	dirs    []meta // directories, whose owners, modes and times are set last
}

func (x *extractor) extract(r io.Reader) error {
	root, err := os.OpenRoot(x.dir)
	if err != nil {
		return fmt.Errorf("--dir: %w", err)
	}
	defer root.Close()
	tr := tar.NewReader(bufio.NewReaderSize(r, copyBuffer))
	buf := make([]byte, copyBuffer)
	sawRoot := false
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read the stream: %w", err)
		}
		if !sawRoot {
			if hdr.Name != "." || hdr.Typeflag != tar.TypeDir {
				return fmt.Errorf("the stream does not start with the root directory but %q", hdr.Name)
			}
			sawRoot = true
			x.dirs = append(x.dirs, metaOf(hdr))
			continue
		}
		if err := x.entry(root, tr, hdr, buf); err != nil {
			return err
		}
	}
	if !sawRoot {
		return errors.New("the stream ended before its first entry")
	}
	// Deepest first, so that a read-only directory is closed after its
	// children are set.
	for _, m := range slices.Backward(x.dirs) {
		if err := x.finish(root, m); err != nil {
			return err
		}
	}
	return nil
}

func (x *extractor) entry(root *os.Root, tr *tar.Reader, hdr *tar.Header, buf []byte) error {
	name := hdr.Name
	if !validName(name) {
		return fmt.Errorf("the stream holds an invalid path %q", name)
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		if err := root.Mkdir(name, 0o700); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
		x.dirs = append(x.dirs, metaOf(hdr))
		return nil
	case tar.TypeSymlink:
		if err := root.Symlink(hdr.Linkname, name); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
		if x.chown {
			if err := root.Lchown(name, hdr.Uid, hdr.Gid); err != nil {
				return fmt.Errorf("write %s: %w", name, err)
			}
		}
		return x.lchtimes(name, hdr.ModTime)
	case tar.TypeReg:
		for k := range hdr.PAXRecords {
			// A sparse file's few bytes in the stream could stand for
			// any size on disk; serve never sends one.
			if strings.HasPrefix(k, "GNU.sparse.") {
				return fmt.Errorf("the stream holds %q as a sparse file", name)
			}
		}
		w, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
		n, err := io.CopyBuffer(w, &countingReader{r: tr, n: x.counted}, buf)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err == nil && n != hdr.Size {
			err = fmt.Errorf("%d bytes of %d", n, hdr.Size)
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
		return x.finish(root, metaOf(hdr))
	}
	return fmt.Errorf("the stream holds %q of unsupported type %q", name, hdr.Typeflag)
}

// meta is what finish sets of an entry: only this is kept of each
// directory until the end.
type meta struct {
	name     string
	mode     int64
	uid, gid int
	mtime    time.Time
}

func metaOf(hdr *tar.Header) meta {
	return meta{name: hdr.Name, mode: hdr.Mode, uid: hdr.Uid, gid: hdr.Gid, mtime: hdr.ModTime}
}

// finish sets an entry's owner (when running as root), mode and times.
func (x *extractor) finish(root *os.Root, hdr meta) error {
	name := hdr.name
	if x.chown {
		if err := root.Lchown(name, hdr.uid, hdr.gid); err != nil {
			return fmt.Errorf("owner of %s: %w", name, err)
		}
	}
	// After chown, which clears setuid and setgid.
	if err := root.Chmod(name, fileMode(hdr.mode)); err != nil {
		return fmt.Errorf("mode of %s: %w", name, err)
	}
	if err := root.Chtimes(name, hdr.mtime, hdr.mtime); err != nil {
		return fmt.Errorf("times of %s: %w", name, err)
	}
	return nil
}

// lchtimes sets a symlink's own times. Its parents are directories this
// extractor made (os.Root refused anything else), so the path is safe.
func (x *extractor) lchtimes(name string, t time.Time) error {
	ts := []unix.Timespec{unix.NsecToTimespec(t.UnixNano()), unix.NsecToTimespec(t.UnixNano())}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, filepath.Join(x.dir, filepath.FromSlash(name)), ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("times of %s: %w", name, err)
	}
	return nil
}

type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// idleConn fails a Read that waits longer than idle for a byte.
type idleConn struct {
	net.Conn
	idle time.Duration
}

func (c *idleConn) Read(p []byte) (int, error) {
	if err := c.Conn.SetReadDeadline(time.Now().Add(c.idle)); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(p)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = fmt.Errorf("nothing came for %s: %w", c.idle, err)
	}
	return n, err
}

// validName reports whether name is a relative, slash-separated path
// without empty, "." or ".." elements, nor NUL. Any other bytes are
// allowed: Linux names need not be UTF-8.
func validName(name string) bool {
	if name == "" || strings.ContainsRune(name, 0) {
		return false
	}
	for elem := range strings.SplitSeq(name, "/") {
		if elem == "" || elem == "." || elem == ".." {
			return false
		}
	}
	return true
}

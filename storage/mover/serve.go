package mover

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The wire: fetch sends GET treePath; serve answers 200 with the tree as a
// PAX tar stream (Content-Type application/x-tar) in walkTree's order, the
// root first as ".", with the headers below, and after the stream the
// trailers below.
const (
	treePath   = "/tree"
	healthPath = HealthPath

	// headerTotalBytes and headerFiles: the source's regular files' total
	// size and number when the stream starts (for progress).
	headerTotalBytes = "Ferry-Total-Bytes"
	headerFiles      = "Ferry-Files"
	// trailerSHA256 is the source's digest read again after the stream;
	// trailerSentSHA256 the digest of what the stream carried. They differ
	// when the source changed during the copy. trailerError is set, with
	// neither digest, when serve could not finish the stream.
	trailerSHA256     = "Ferry-Sha256"
	trailerSentSHA256 = "Ferry-Sent-Sha256"
	trailerError      = "Ferry-Error"
)

// DefaultPort is the port serve and relay listen on by default (--listen
// :7070); HealthPath answers 200 on serve's port, for a readiness probe.
const (
	DefaultPort = 7070
	HealthPath  = "/healthz"
)

// TokenEnv names the environment variable holding a shared secret: when
// set for serve, a fetch must present it (fetch sends its own), so that
// nobody else who reaches serve's port reads the volume. Pods set it from
// a Secret.
const TokenEnv = "FERRY_MOVER_TOKEN"

func validToken(token string, r *http.Request) bool {
	if token == "" {
		return true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}

// copyBuffer is the size of every buffer a copy goes through: memory is
// bounded by a few of these, whatever the files' sizes.
const copyBuffer = 256 << 10

// keepAlive makes either end notice within about 25 s a peer that went
// away without closing (a cut tunnel), even while it only waits.
var keepAlive = net.KeepAliveConfig{Enable: true, Idle: 10 * time.Second, Interval: 5 * time.Second, Count: 3}

// Listen listens on addr (TCP) with keep-alives that notice a dead peer.
func Listen(ctx context.Context, addr string) (net.Listener, error) {
	lc := net.ListenConfig{KeepAliveConfig: keepAlive}
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--listen %s: %w", addr, err)
	}
	return ln, nil
}

// Server serves the tree under Dir, read-only, to one fetcher at a time: a
// new fetch ends the one being served (a restarted fetch must not wait for
// the old connection to time out), and serving goes on after each fetch.
type Server struct {
	Dir string
	// Token, when set, must be presented by every fetch (TokenEnv).
	Token string
	Log   *slog.Logger

	slot chan struct{} // held by the transfer being served
	mu   sync.Mutex
	cur  net.Conn // the connection of the transfer being served

	// HeartbeatInterval is how often serve writes a byte while it reads
	// the source again after the stream (default 5 s): less than a fetch's
	// IdleTimeout.
	HeartbeatInterval time.Duration

	// afterEntry, when set (tests), is called after each entry is sent;
	// beforeDigest before the source is read again.
	afterEntry   func(rel string)
	beforeDigest func()
}

type connKey struct{}

// Serve serves on ln until ctx ends, then closes every connection and
// returns nil; it returns an error only if serving fails.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if s.Log == nil {
		s.Log = slog.New(slog.DiscardHandler)
	}
	s.slot = make(chan struct{}, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+treePath, s.serveTree)
	mux.HandleFunc("GET "+healthPath, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 30 * time.Second,
		ConnContext:       func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, connKey{}, c) },
		ErrorLog:          slog.NewLogLogger(s.Log.Handler(), slog.LevelWarn),
	}
	s.Log.Info("serving", "dir", s.Dir, "address", ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
		_ = srv.Close()
		<-errc
		s.Log.Info("stopped")
		return nil
	}
}

// acquire makes r's transfer the only one: it ends the one being served,
// if any, and waits for its slot.
func (s *Server) acquire(r *http.Request) bool {
	conn, _ := r.Context().Value(connKey{}).(net.Conn)
	var ended net.Conn
	for {
		s.mu.Lock()
		if s.cur != nil && s.cur != ended {
			s.Log.Info("a new fetch ends the one being served", "old", s.cur.RemoteAddr().String(), "new", r.RemoteAddr)
			_ = s.cur.Close()
			ended = s.cur
		}
		s.mu.Unlock()
		select {
		case s.slot <- struct{}{}:
			s.mu.Lock()
			s.cur = conn
			s.mu.Unlock()
			return true
		case <-r.Context().Done():
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (s *Server) release() {
	s.mu.Lock()
	s.cur = nil
	s.mu.Unlock()
	<-s.slot
}

func (s *Server) serveTree(w http.ResponseWriter, r *http.Request) {
	if !validToken(s.Token, r) {
		s.Log.Warn("refused a fetch without the token", "fetcher", r.RemoteAddr)
		http.Error(w, "a fetch must present the token "+TokenEnv+" holds", http.StatusUnauthorized)
		return
	}
	if !s.acquire(r) {
		return
	}
	defer s.release()
	log := s.Log.With("fetcher", r.RemoteAddr)
	start := time.Now()
	total, err := TreeSize(s.Dir)
	if err != nil {
		log.Error("size of the tree", "err", err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/x-tar")
	w.Header().Set("Trailer", trailerSHA256+", "+trailerSentSHA256+", "+trailerError)
	w.Header().Set(headerTotalBytes, strconv.FormatInt(total.Bytes, 10))
	w.Header().Set(headerFiles, strconv.FormatInt(total.Files, 10))
	w.WriteHeader(http.StatusOK)
	log.Info("sending", "bytes", total.Bytes, "files", total.Files)

	sent, err := s.writeTree(w)
	if err != nil {
		// The stream ends without the tar's end: fetch fails, with this.
		log.Error("sending failed", "err", err)
		w.Header().Set(trailerError, reasonLine(err))
		return
	}
	// The second read: what the source holds now. Fetch compares its own
	// digest of what it wrote with this one. Meanwhile a newline now and
	// then after the tar's end (fetch discards what follows it) tells
	// fetch that serve is still there.
	stopBeats := s.heartbeat(w)
	if s.beforeDigest != nil {
		s.beforeDigest()
	}
	now, err := treeDigest(r.Context(), s.Dir)
	stopBeats()
	if err != nil {
		log.Error("digest of the source", "err", err)
		w.Header().Set(trailerError, reasonLine(err))
		return
	}
	w.Header().Set(trailerSentSHA256, sent.SHA256)
	w.Header().Set(trailerSHA256, now.SHA256)
	if now.SHA256 != sent.SHA256 {
		log.Warn("the source changed while it was sent", "sent", sent.SHA256, "now", now.SHA256)
	}
	log.Info("sent", "bytes", sent.Bytes, "files", sent.Files, "sha256", now.SHA256, "duration", time.Since(start).Round(time.Millisecond).String())
}

// heartbeat writes a newline to w every HeartbeatInterval until stop,
// which returns once it no longer writes.
func (s *Server) heartbeat(w http.ResponseWriter) (stop func()) {
	every := s.HeartbeatInterval
	if every <= 0 {
		every = 5 * time.Second
	}
	rc := http.NewResponseController(w)
	return tick(every, func() bool {
		if _, err := w.Write([]byte{'\n'}); err != nil {
			return false
		}
		_ = rc.Flush()
		return true
	})
}

// writeTree writes the tree as tar to w, returning the digest of what it
// wrote.
func (s *Server) writeTree(w io.Writer) (Sum, error) {
	bw := bufio.NewWriterSize(w, copyBuffer)
	tw := tar.NewWriter(bw)
	d := newDigester()
	buf := make([]byte, copyBuffer)
	err := walkTree(s.Dir, func(rel string, info fs.FileInfo, kind byte) error {
		if err := s.writeEntry(tw, d, buf, rel, info, kind); err != nil {
			return err
		}
		if s.afterEntry != nil {
			s.afterEntry(rel)
		}
		return nil
	}, func(rel string, info fs.FileInfo) {
		s.Log.Warn("skipped: not a regular file, directory or symlink", "path", rel, "mode", info.Mode().String())
	})
	if err != nil {
		return Sum{}, fmt.Errorf("send %s: %w", s.Dir, err)
	}
	if err := tw.Close(); err != nil {
		return Sum{}, fmt.Errorf("send %s: %w", s.Dir, err)
	}
	if err := bw.Flush(); err != nil {
		return Sum{}, fmt.Errorf("send %s: %w", s.Dir, err)
	}
	return d.sum(), nil
}

func (s *Server) writeEntry(tw *tar.Writer, d *digester, buf []byte, rel string, info fs.FileInfo, kind byte) error {
	path := filepath.Join(s.Dir, filepath.FromSlash(rel))
	hdr := &tar.Header{
		Name:    rel,
		Mode:    unixMode(info.Mode()),
		ModTime: info.ModTime(),
		Format:  tar.FormatPAX,
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		hdr.Uid, hdr.Gid = int(st.Uid), int(st.Gid)
	}
	switch kind {
	case kindDir:
		hdr.Typeflag = tar.TypeDir
		d.entry(rel, kind, hdr.Mode, 0, "")
		return tw.WriteHeader(hdr)
	case kindSymlink:
		target, err := os.Readlink(path)
		if err != nil {
			return err
		}
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
		d.entry(rel, kind, hdr.Mode, 0, target)
		return tw.WriteHeader(hdr)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	hdr.Typeflag, hdr.Size = tar.TypeReg, info.Size()
	d.entry(rel, kind, hdr.Mode, hdr.Size, "")
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	out := io.MultiWriter(tw, d)
	n, err := io.CopyBuffer(out, io.LimitReader(f, hdr.Size), buf)
	if err != nil {
		return fmt.Errorf("send %s: %w", rel, err)
	}
	if n < hdr.Size {
		// The file shrank while it was sent: the stream keeps its
		// promised size, and the digests tell the source changed.
		s.Log.Warn("the file shrank while it was sent", "path", rel, "size", hdr.Size, "read", n)
		if _, err := io.CopyBuffer(out, io.LimitReader(zeros{}, hdr.Size-n), buf); err != nil {
			return fmt.Errorf("send %s: %w", rel, err)
		}
	}
	return nil
}

// zeros reads zero bytes forever.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TreeSize is the regular files' total size and number under dir, from
// their metadata alone.
func TreeSize(dir string) (Sum, error) {
	var s Sum
	err := walkTree(dir, func(_ string, info fs.FileInfo, kind byte) error {
		if kind == kindFile {
			s.Files++
			s.Bytes += info.Size()
		}
		return nil
	}, nil)
	if err != nil {
		return Sum{}, fmt.Errorf("size of %s: %w", dir, err)
	}
	return s, nil
}

var errNoDigest = errors.New("the source ended the stream without its digest")

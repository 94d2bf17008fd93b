package mover

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fetchInto fetches from addr into dst, returning the result, the
// progress lines and the error.
func fetchInto(t *testing.T, dst, from string, hook func()) (Result, []Progress, error) {
	t.Helper()
	var out syncBuffer
	f := &Fetcher{Dir: dst, From: from, Progress: &out, ProgressInterval: 20 * time.Millisecond, ConnectTimeout: 3 * time.Second, afterExtract: hook}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := f.Fetch(ctx)
	var lines []Progress
	sc := bufio.NewScanner(bytes.NewReader(out.Bytes()))
	for sc.Scan() {
		p, perr := ParseProgress(sc.Bytes())
		if perr != nil {
			t.Fatalf("progress: %v", perr)
		}
		lines = append(lines, p)
	}
	return res, lines, err
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

// junk fills dir with what a previous, interrupted copy could have left,
// including a directory without write permission.
func junk(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "stale", "ro"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"big.bin", "stale/ro/x", "extra"} {
		if err := os.WriteFile(filepath.Join(dir, p), []byte("stale"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(dir, "stale", "ro"), 0o500); err != nil {
		t.Fatal(err)
	}
}

func TestServeFetchCopiesTheTreeExactly(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	const large = 48 << 20
	makeTree(t, src, large)
	junk(t, dst)
	want, err := TreeDigest(src)
	if err != nil {
		t.Fatal(err)
	}
	addr := startServer(t, &Server{Dir: src})
	res, lines, err := fetchInto(t, dst, addr, nil)
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	if res.SHA256 != want.SHA256 || res.Bytes != want.Bytes || res.Files != want.Files || res.Bytes < large {
		t.Errorf("result %+v, want the source's %+v", res, want)
	}
	compareTrees(t, src, dst)
	if len(lines) == 0 {
		t.Fatal("no progress line")
	}
	last := lines[len(lines)-1]
	if last.Bytes != want.Bytes || last.TotalBytes != want.Bytes || last.ETASeconds != 0 || last.BytesPerSecond <= 0 {
		t.Errorf("last progress %+v, want all %d bytes copied", last, want.Bytes)
	}
	for i := 1; i < len(lines); i++ {
		if lines[i].Bytes < lines[i-1].Bytes {
			t.Errorf("progress went back: %+v after %+v", lines[i], lines[i-1])
		}
	}
	// Serving goes on: a second fetch gets the same.
	dst2 := t.TempDir()
	if res2, _, err := fetchInto(t, dst2, addr, nil); err != nil || res2 != res {
		t.Fatalf("second fetch: %+v %v, want %+v", res2, err, res)
	}
}

func TestFetchThroughRelay(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	makeTree(t, src, 8<<20)
	relay := startRelay(t, startServer(t, &Server{Dir: src}))
	res, _, err := fetchInto(t, dst, relay, nil)
	if err != nil {
		t.Fatalf("fetch through the relay: %v", err)
	}
	want, _ := TreeDigest(src)
	if res.SHA256 != want.SHA256 {
		t.Errorf("digest %s, want %s", res.SHA256, want.SHA256)
	}
	compareTrees(t, src, dst)
}

func TestCutConnectionFailsAndARerunStartsClean(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	makeTree(t, src, 16<<20)
	addr := startServer(t, &Server{Dir: src})
	// Through a relay whose upstream is cut after 5 MiB.
	cut := startCutter(t, addr, 5<<20, false)
	_, _, err := fetchInto(t, dst, startRelay(t, cut.addr()), nil)
	if err == nil {
		t.Fatal("fetch through a cut connection succeeded")
	}
	t.Logf("cut: %v", err)
	partial := listTree(t, dst)
	if _, ok := partial["data"]; ok {
		t.Fatalf("the cut copy wrote entries after the large file: %v", partial)
	}
	// The rerun empties what the cut one left and copies everything.
	if err := os.WriteFile(filepath.Join(dst, "left-by-hand"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := fetchInto(t, dst, addr, nil); err != nil {
		t.Fatalf("rerun: %v", err)
	}
	compareTrees(t, src, dst)
}

func TestSourceChangedDuringCopyIsADigestMismatch(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	makeTree(t, src, 1<<20)
	s := &Server{Dir: src}
	var once sync.Once
	s.afterEntry = func(rel string) {
		if rel == "data/part-05" {
			// A pod still writing: big.bin, already sent, changes.
			once.Do(func() {
				if err := os.WriteFile(filepath.Join(src, "big.bin"), []byte("changed"), 0o644); err != nil {
					t.Error(err)
				}
			})
		}
	}
	_, _, err := fetchInto(t, dst, startServer(t, s), nil)
	if err == nil || !strings.Contains(err.Error(), "digest mismatch") || !strings.Contains(err.Error(), "source changed") {
		t.Fatalf("fetch of a source changed during the copy: %v, want a digest mismatch saying the source changed", err)
	}
}

func TestWrittenDataCorruptedIsADigestMismatch(t *testing.T) {
	for name, corrupt := range map[string]func(dst string) error{
		"content": func(dst string) error {
			f, err := os.OpenFile(filepath.Join(dst, "big.bin"), os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.WriteAt([]byte{'!'}, 12345)
			return err
		},
		"mode": func(dst string) error { return os.Chmod(filepath.Join(dst, "data", "exec.sh"), 0o644) },
		"target": func(dst string) error {
			_ = os.Remove(filepath.Join(dst, "link-rel"))
			return os.Symlink("other", filepath.Join(dst, "link-rel"))
		},
		"extra": func(dst string) error { return os.Mkdir(filepath.Join(dst, "empty-dir", "extra"), 0o755) },
		"gone":  func(dst string) error { return os.Remove(filepath.Join(dst, "data", "empty")) },
	} {
		t.Run(name, func(t *testing.T) {
			src, dst := t.TempDir(), t.TempDir()
			makeTree(t, src, 1<<20)
			hook := func() {
				if err := corrupt(dst); err != nil {
					t.Error(err)
				}
			}
			_, _, err := fetchInto(t, dst, startServer(t, &Server{Dir: src}), hook)
			if err == nil || !strings.Contains(err.Error(), "digest mismatch") || !strings.Contains(err.Error(), "differs from what was sent") {
				t.Fatalf("fetch with the written tree changed (%s): %v, want a digest mismatch", name, err)
			}
		})
	}
}

func TestANewFetchEndsTheOneBeingServed(t *testing.T) {
	src := t.TempDir()
	makeTree(t, src, 16<<20)
	addr := startServer(t, &Server{Dir: src})
	// The first fetch's connection stalls after 1 MiB, as through a cut
	// tunnel nobody noticed yet.
	stall := startCutter(t, addr, 1<<20, true)
	first := make(chan error, 1)
	go func() {
		_, _, err := fetchInto(t, t.TempDir(), stall.addr(), nil)
		first <- err
	}()
	select {
	case <-stall.reached:
	case <-time.After(20 * time.Second):
		t.Fatal("the first fetch never started")
	}
	dst := t.TempDir()
	if _, _, err := fetchInto(t, dst, addr, nil); err != nil {
		t.Fatalf("second fetch while the first stalls: %v", err)
	}
	compareTrees(t, src, dst)
	stall.release()
	select {
	case err := <-first:
		if err == nil {
			t.Fatal("the first fetch, ended by the second, succeeded")
		}
		t.Logf("first: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the first fetch did not end")
	}
}

func TestFetchWaitsForTheSource(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	makeTree(t, src, 1<<10)
	ln, err := Listen(t.Context(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	go func() {
		time.Sleep(1500 * time.Millisecond)
		ln, err := Listen(t.Context(), addr)
		if err != nil {
			t.Error(err)
			return
		}
		go func() { _ = (&Server{Dir: src}).Serve(t.Context(), ln) }()
	}()
	if _, _, err := fetchInto(t, dst, addr, nil); err != nil {
		t.Fatalf("fetch started before serve: %v", err)
	}
	compareTrees(t, src, dst)
	// Nothing listening at all: a failure within the connect timeout.
	start := time.Now()
	if _, _, err := fetchInto(t, t.TempDir(), "127.0.0.1:1", nil); err == nil || time.Since(start) > 10*time.Second {
		t.Fatalf("fetch from nothing: %v after %s", err, time.Since(start))
	}
}

func TestTreeDigestIsDeterministicAndCoversEachProperty(t *testing.T) {
	dir := t.TempDir()
	makeTree(t, dir, 1<<10)
	base, err := TreeDigest(dir)
	if err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	makeTree(t, other, 1<<10)
	if again, _ := TreeDigest(other); again != base {
		t.Fatalf("same tree, two digests: %+v %+v", base, again)
	}
	// Owners and times are not covered.
	old := time.Unix(1e9, 0)
	if err := os.Chtimes(filepath.Join(dir, "big.bin"), old, old); err != nil {
		t.Fatal(err)
	}
	if again, _ := TreeDigest(dir); again != base {
		t.Fatalf("mtime changed the digest")
	}
	for name, change := range map[string]func() error{
		"content": func() error {
			return os.WriteFile(filepath.Join(dir, "data/exec.sh"), bytes.Repeat([]byte{0}, 100), 0o755)
		},
		"size":   func() error { return os.Truncate(filepath.Join(dir, "data/exec.sh"), 99) },
		"mode":   func() error { return os.Chmod(filepath.Join(dir, "data/exec.sh"), 0o754) },
		"setgid": func() error { return os.Chmod(filepath.Join(dir, "setgid"), 0o750) },
		"target": func() error {
			os.Remove(filepath.Join(dir, "link-rel"))
			return os.Symlink("big.bix", filepath.Join(dir, "link-rel"))
		},
		"type": func() error {
			os.Remove(filepath.Join(dir, "data/empty"))
			return os.Mkdir(filepath.Join(dir, "data/empty"), 0o600)
		},
		"name":        func() error { return os.Rename(filepath.Join(dir, "data/part-01"), filepath.Join(dir, "data/part-1")) },
		"empty dir":   func() error { return os.Remove(filepath.Join(dir, "empty-dir/nested-empty")) },
		"root's mode": func() error { return os.Chmod(dir, 0o755) },
	} {
		before, _ := TreeDigest(dir)
		if err := change(); err != nil {
			t.Fatal(err)
		}
		after, err := TreeDigest(dir)
		if err != nil {
			t.Fatal(err)
		}
		if after.SHA256 == before.SHA256 {
			t.Errorf("changing the %s did not change the digest", name)
		}
	}
}

func TestTokenIsRequiredWhenSet(t *testing.T) {
	src := t.TempDir()
	makeTree(t, src, 1<<10)
	addr := startServer(t, &Server{Dir: src, Token: "s3cret"})
	for _, token := range []string{"", "wrong", "s3cret-but-longer"} {
		start := time.Now()
		f := &Fetcher{Dir: t.TempDir(), From: addr, Token: token, ConnectTimeout: time.Minute}
		_, err := f.Fetch(t.Context())
		if err == nil || !strings.Contains(err.Error(), "401") || time.Since(start) > 10*time.Second {
			t.Fatalf("fetch with token %q: %v after %s, want refused at once", token, err, time.Since(start))
		}
	}
	dst := t.TempDir()
	if _, err := (&Fetcher{Dir: dst, From: addr, Token: "s3cret"}).Fetch(t.Context()); err != nil {
		t.Fatalf("fetch with the token: %v", err)
	}
	compareTrees(t, src, dst)
	resp, err := http.Get("http://" + addr + healthPath)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %v %v", healthPath, resp, err)
	}
	resp.Body.Close()
}

// TestMemoryStaysBounded copies a 256 MiB file, serve and fetch in this
// process, and samples the heap: it must not grow with the file.
func TestMemoryStaysBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 512 MiB")
	}
	src, dst := t.TempDir(), t.TempDir()
	f, err := os.Create(filepath.Join(src, "huge"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(f, randReader{rand.New(rand.NewPCG(3, 4))}, 256<<20); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	addr := startServer(t, &Server{Dir: src})
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak atomic.Uint64
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
		}
	}()
	_, _, err = fetchInto(t, dst, addr, nil)
	close(done)
	if err != nil {
		t.Fatal(err)
	}
	growth := int64(peak.Load()) - int64(base)
	t.Logf("heap: %d MiB before, peak %d MiB during the copy", base>>20, peak.Load()>>20)
	if growth > 32<<20 {
		t.Fatalf("the heap grew by %d MiB copying a 256 MiB file", growth>>20)
	}
}

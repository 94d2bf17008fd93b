package mover

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
)

func FuzzParseProgress(f *testing.F) {
	for _, s := range []string{
		`{"bytes":1,"totalBytes":2,"bytesPerSecond":3,"etaSeconds":4}`,
		`{"bytes":0,"totalBytes":0,"bytesPerSecond":0,"etaSeconds":-1}`,
		`{"bytes":-1}`, `null`, `[]`, `{"bytes":1} {}`, `{"bytes":1e3}`, ``, `{"extra":true}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		p, err := ParseProgress(line)
		if err != nil {
			return
		}
		if p.Bytes < 0 || p.TotalBytes < 0 || p.BytesPerSecond < 0 || p.ETASeconds < -1 {
			t.Fatalf("%q parsed as %+v", line, p)
		}
		again, _ := json.Marshal(p)
		if q, err := ParseProgress(again); err != nil || q != p {
			t.Fatalf("%q: %+v does not round-trip: %+v %v", line, p, q, err)
		}
	})
}

func FuzzParseTerminationMessage(f *testing.F) {
	for _, s := range []string{
		`{"bytes":268435456,"files":3,"sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}`,
		`{"bytes":1,"files":1,"sha256":"E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855"}`,
		`{"bytes":1,"files":1}`, `digest mismatch: sha256 of /data is x, of the source y`, ``, `{`, `{"sha256":1}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		r, err := ParseTerminationMessage(msg)
		if err != nil {
			var failed *FailedError
			if !errors.As(err, &failed) || failed.Reason == "" {
				t.Fatalf("%q: %v is not a FailedError with a reason", msg, err)
			}
			return
		}
		if !sha256Hex.MatchString(r.SHA256) || r.Bytes < 0 || r.Files < 0 {
			t.Fatalf("%q accepted as %+v", msg, r)
		}
		again, _ := json.Marshal(r)
		if q, err := ParseTerminationMessage(string(again)); err != nil || q != r {
			t.Fatalf("%q: %+v does not round-trip: %+v %v", msg, r, q, err)
		}
	})
}

// FuzzExtract feeds fetch's extractor any stream: it must never panic nor
// write outside its directory, whatever the paths, link targets and types.
func FuzzExtract(f *testing.F) {
	// A real stream of a small tree.
	src := f.TempDir()
	makeTree(f, src, 100)
	var real bytes.Buffer
	if _, err := (&Server{Dir: src}).writeTree(&real); err != nil {
		f.Fatal(err)
	}
	f.Add(real.Bytes())
	hostile := func(hdrs ...*tar.Header) []byte {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for _, h := range append([]*tar.Header{{Name: ".", Typeflag: tar.TypeDir, Mode: 0o755}}, hdrs...) {
			h.Format = tar.FormatPAX
			_ = tw.WriteHeader(h)
			if h.Size > 0 {
				_, _ = tw.Write(bytes.Repeat([]byte{'x'}, int(h.Size)))
			}
		}
		_ = tw.Close()
		return b.Bytes()
	}
	f.Add(hostile(&tar.Header{Name: "../escaped", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}))
	f.Add(hostile(&tar.Header{Name: "/abs", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}))
	f.Add(hostile(&tar.Header{Name: "up", Typeflag: tar.TypeSymlink, Linkname: ".."},
		&tar.Header{Name: "up/escaped", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}))
	f.Add(hostile(&tar.Header{Name: "d", Typeflag: tar.TypeDir, Mode: 0o755},
		&tar.Header{Name: "d", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}))
	f.Add(hostile(&tar.Header{Name: "hard", Typeflag: tar.TypeLink, Linkname: "/etc/passwd"}))
	f.Add(hostile(&tar.Header{Name: "dev", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}))
	f.Add(hostile(&tar.Header{Name: "a/./b", Typeflag: tar.TypeDir, Mode: 0o755}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, stream []byte) {
		parent := t.TempDir()
		dir := filepath.Join(parent, "dst")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		x := &extractor{dir: dir, counted: new(atomic.Int64)}
		_ = x.extract(bytes.NewReader(stream))
		entries, err := os.ReadDir(parent)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 || entries[0].Name() != "dst" {
			t.Fatalf("the stream wrote outside its directory: %v", entries)
		}
		// The test's clean-up must be able to remove what was made.
		_ = os.Chmod(dir, 0o700)
		_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				_ = os.Chmod(p, 0o700)
			}
			return nil
		})
	})
}

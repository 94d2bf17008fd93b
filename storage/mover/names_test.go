package mover

import (
	"os"
	"path/filepath"
	"testing"
)

// TestOddNamesAreCopied: names Linux allows that are not UTF-8, or hold
// newlines, backslashes, colons or equals signs (PAX records are
// "key=value\n"), or are as long as a name may be, are copied as they are.
func TestOddNamesAreCopied(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	names := []string{"latin1-\xe9t\xe9", "bad-\xff\xfe", "new\nline", `back\slash`, "col:on", "eq=uals", " leading space", "trailing space ", "-dash", "\x01ctrl", string(make255('n'))}
	for i, n := range names {
		if err := os.WriteFile(filepath.Join(src, n), []byte(n), 0o644); err != nil {
			t.Fatalf("name %d %q: %v", i, n, err)
		}
		if err := os.Mkdir(filepath.Join(src, "dir-"+n[:min(len(n), 200)]), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("target-"+n[:min(len(n), 200)], filepath.Join(src, "link-"+n[:min(len(n), 200)])); err != nil {
			t.Fatal(err)
		}
	}
	res, _, err := fetchInto(t, dst, startServer(t, &Server{Dir: src}), nil)
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	want, _ := TreeDigest(src)
	if res.SHA256 != want.SHA256 {
		t.Fatalf("digest %s, want %s", res.SHA256, want.SHA256)
	}
	compareTrees(t, src, dst)
}

func make255(c byte) []byte {
	b := make([]byte, 255)
	for i := range b {
		b[i] = c
	}
	return b
}

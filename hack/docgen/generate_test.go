package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func testConfig(out string) config {
	return config{out: out, crds: "../../manifests/crds", chart: "../../charts/ferry"}
}

// tree is every file under dir by its relative path.
func tree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		files[rel] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// The pages depend on the tree only: not on the environment the generator
// runs in (defaults taken from it), nor on what was there before.
func TestGenerateIsDeterministic(t *testing.T) {
	first := t.TempDir()
	for _, v := range []string{"TMPDIR", "HOST_IP", "POD_IP", "POD_NAME"} {
		t.Setenv(v, "")
	}
	if err := generate(testConfig(first)); err != nil {
		t.Fatal(err)
	}
	second := t.TempDir()
	if err := os.MkdirAll(filepath.Join(second, "cli"), 0o755); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(second, "cli", "ferryctl_gone.md")
	if err := os.WriteFile(stale, []byte("a command no longer there"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", t.TempDir())
	t.Setenv("HOST_IP", "192.0.2.1")
	t.Setenv("POD_IP", "192.0.2.2")
	t.Setenv("POD_NAME", "gateway-0")
	t.Setenv("KUBECONFIG", "/nowhere/kubeconfig")
	if err := generate(testConfig(second)); err != nil {
		t.Fatal(err)
	}
	a, b := tree(t, first), tree(t, second)
	for name, content := range a {
		if !bytes.Equal(content, b[name]) {
			t.Errorf("%s differs between two runs in different environments", name)
		}
	}
	for name := range b {
		if _, ok := a[name]; !ok {
			t.Errorf("%s written by one run only", name)
		}
	}
	if len(a) < 30 {
		t.Errorf("%d pages, want the CLI's, API's, values' and flags' (over 30)", len(a))
	}
}

var (
	link = regexp.MustCompile(`\]\(([^)#]+)(#[^)]*)?\)`)
	// code spans hold no links (patterns such as ^a([-a-z])?$ look like one).
	codeSpan = regexp.MustCompile("``[^\n]*?``|`[^`\n]*`")
)

// The index links every generated page, and every relative link of the
// pages reaches a page that exists (annotations.md, written by hand, aside).
func TestIndexLinksEveryPage(t *testing.T) {
	out := t.TempDir()
	if err := generate(testConfig(out)); err != nil {
		t.Fatal(err)
	}
	pages := tree(t, out)
	linked := map[string]bool{}
	for _, m := range link.FindAllStringSubmatch(string(pages["README.md"]), -1) {
		linked[m[1]] = true
	}
	for name := range pages {
		if name != "README.md" && !linked[name] {
			t.Errorf("README.md does not link %s", name)
		}
	}
	for name, content := range pages {
		for _, m := range link.FindAllStringSubmatch(codeSpan.ReplaceAllString(string(content), ""), -1) {
			target := m[1]
			if strings.Contains(target, "://") {
				continue
			}
			rel := filepath.Clean(filepath.Join(filepath.Dir(name), target))
			if _, ok := pages[rel]; ok || rel == "annotations.md" || strings.HasPrefix(rel, "..") {
				continue
			}
			t.Errorf("%s links %s: no such page", name, target)
		}
	}
}

package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckSnippetsFixture(t *testing.T) {
	page := strings.Join([]string{
		"# Page",
		"",
		"*Illustrative:* names are examples,",
		"spread over two lines.",
		"",
		"```sh",
		"ferryctl peer",
		"```",
		"",
		"Run by a spec:",
		"",
		"```sh",
		"ferryctl status",
		"```",
		"<!-- run by: e2e spec \"Peering\" (make test-e2e LABELS=peering) -->",
		"",
		"Not marked:",
		"",
		"```bash",
		"kubectl get pods",
		"```",
		"",
		"```sh",
		"ferryctl unpeer",
		"```",
		"",
		"<!-- run by: e2e spec \"Gone\" (make test-e2e LABELS=no-such-label) -->",
		"",
		"```yaml",
		"kind: Pod",
		"```",
		"",
		"*Illustrative:* only the next block.",
		"",
		"```sh",
		"true",
		"```",
		"",
		"```console",
		"$ false",
		"```",
	}, "\n")
	got := CheckSnippets("page.md", []byte(page), map[string]bool{"peering": true})
	var lines []int
	for _, p := range got {
		lines = append(lines, p.Line)
	}
	want := []int{19, 27, 39}
	if len(lines) != len(want) {
		t.Fatalf("problems %v, want at lines %v", got, want)
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Fatalf("problems %v, want at lines %v", got, want)
		}
	}
}

func TestE2ELabels(t *testing.T) {
	labels := map[string]bool{}
	E2ELabels([]byte(`var _ = Describe("x", Label("offloading", "chaos"), Ordered, func() {
	It("y", Label("real"), func() {})`), labels)
	for _, l := range []string{"offloading", "chaos", "real"} {
		if !labels[l] {
			t.Errorf("label %q not found in %v", l, labels)
		}
	}
}

// Every shell snippet of the task pages and the examples' READMEs is either
// run by a test or marked illustrative, and a run-by note names an e2e
// label that exists.
func TestRepositoryUsageSnippets(t *testing.T) {
	labels := map[string]bool{}
	specs, err := filepath.Glob(filepath.Join(repoRoot, "test", "e2e", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range specs {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		E2ELabels(src, labels)
	}
	if len(labels) == 0 {
		t.Fatal("no e2e labels found")
	}
	pages, err := filepath.Glob(filepath.Join(repoRoot, "docs", "usage", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) == 0 {
		t.Fatal("no pages in docs/usage")
	}
	examples, err := filepath.Glob(filepath.Join(repoRoot, "examples", "*", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, examples...)
	for _, p := range pages {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(repoRoot, p)
		for _, problem := range CheckSnippets(filepath.ToSlash(rel), src, labels) {
			t.Error(problem)
		}
	}
}

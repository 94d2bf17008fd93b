package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ferry-io/ferry/hack/docgen/md"
)

func TestAnchorsAsGitHubMakesThem(t *testing.T) {
	for heading, want := range map[string]string{
		"Quick start": "quick-start",
		"Local first, burst to providers (`LocalFirst`, `RemoteFirst`)": "local-first-burst-to-providers-localfirst-remotefirst",
		"kubectl logs, exec, attach, port-forward and stats":            "kubectl-logs-exec-attach-port-forward-and-stats",
		"Checking the fabric: ferryctl test network":                    "checking-the-fabric-ferryctl-test-network",
		"What's new?  Two  spaces":                                      "whats-new--two--spaces",
		"snake_case & dots.v1":                                          "snake_case--dotsv1",
		"Über Größe 2²":                                                 "über-größe-2²",
	} {
		if got := md.Anchor(heading); got != want {
			t.Errorf("md.Anchor(%q) = %q, want %q", heading, got, want)
		}
	}
}

func TestParseAnchorsAndLinks(t *testing.T) {
	src := []byte("# Title\n\n## Usage\n\n### Usage\n\n## Usage\n\n## `ferryctl peer` *now*\n\n" +
		"<a id=\"custom\"></a>\n\n[a](x.md#usage-1) and <a href=\"y.md\">y</a>\n\n" +
		"```\n[not a link](nowhere.md)\n```\n\n`[code](nowhere.md)`\n\n[ref][r]\n\n[r]: z.md#title\n")
	p := Parse(src)
	for _, a := range []string{"title", "usage", "usage-1", "usage-2", "ferryctl-peer-now", "custom"} {
		if !p.Anchors[a] {
			t.Errorf("anchor %q missing; have %v", a, p.Anchors)
		}
	}
	var dests []string
	for _, l := range p.Links {
		dests = append(dests, l.Dest)
	}
	if want := []string{"x.md#usage-1", "y.md", "z.md#title"}; !reflect.DeepEqual(dests, want) {
		t.Errorf("links = %q, want %q", dests, want)
	}
	if p.Links[0].Line != 13 {
		t.Errorf("line of the first link = %d, want 13", p.Links[0].Line)
	}
}

// fixtureTree is a small repository with every kind of link, good and
// broken.
func fixtureTree(t *testing.T) *Tree {
	t.Helper()
	files := map[string]string{
		"README.md": "# Ferry\n\n## Install\n\n## Install\n\n" +
			"[ok](docs/README.md) [ok dir](docs/usage) [ok anchor](docs/usage/peer.md#peering-two-clusters)\n" +
			"[ok dup](#install-1) [ok self](#ferry) [ok source](cmd/main.go#L3) [ok web](https://example.com/x.md#nope)\n" +
			"[missing file](docs/nope.md) [missing anchor](docs/usage/peer.md#nope)\n" +
			"[missing dup](#install-2) [absolute](/docs/README.md) [outside](../other/README.md)\n" +
			"[missing dir](docs/gone/)\n",
		"docs/README.md":        "# Docs\n\n[peer](usage/peer.md)\n",
		"docs/usage/README.md":  "# Usage\n\n[up](../README.md#docs) [upper case anchor](../README.md#Docs)\n",
		"docs/usage/peer.md":    "# Peering two clusters\n",
		"docs/usage/orphan.md":  "# Nobody links here\n\n[back](../../README.md)\n",
		"docs/concepts/deep.md": "# Only an orphan links here\n",
		"cmd/main.go":           "package main\n",
	}
	files["docs/usage/orphan.md"] += "[deep](../concepts/deep.md)\n"
	var names []string
	for n := range files {
		names = append(names, n)
	}
	tree, err := NewTree(names, func(n string) ([]byte, error) { return []byte(files[n]), nil })
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

func TestCheckLinksFixture(t *testing.T) {
	var got []string
	for _, p := range fixtureTree(t).CheckLinks() {
		got = append(got, p.String())
	}
	want := []string{
		`README.md:9: link "docs/nope.md": docs/nope.md does not exist`,
		`README.md:9: link "docs/usage/peer.md#nope": docs/usage/peer.md has no anchor #nope`,
		`README.md:10: link "#install-2": README.md has no anchor #install-2`,
		`README.md:10: link "/docs/README.md" is absolute: links between repository files are relative`,
		`README.md:10: link "../other/README.md" leaves the repository`,
		`README.md:11: link "docs/gone/": docs/gone does not exist`,
		`docs/usage/README.md:3: link "../README.md#Docs": docs/README.md has no anchor #Docs`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestCheckReachableFixture(t *testing.T) {
	var got []string
	for _, p := range fixtureTree(t).CheckReachable("docs", "README.md", "docs/README.md") {
		got = append(got, p.String())
	}
	want := []string{
		"docs/concepts/deep.md: not reachable by links from README.md or docs/README.md",
		"docs/usage/orphan.md: not reachable by links from README.md or docs/README.md",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// repoRoot is the repository this package is in.
const repoRoot = "../.."

// repositoryTree is the repository's files as git sees them: tracked, and
// new ones not ignored (so a page not yet committed is checked too).
func repositoryTree(t *testing.T) *Tree {
	t.Helper()
	out, err := exec.Command("git", "-C", repoRoot, "ls-files", "--cached", "--others", "--exclude-standard", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	var files []string
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if _, err := os.Stat(filepath.Join(repoRoot, f)); err == nil { // deleted, not yet staged
			files = append(files, f)
		}
	}
	tree, err := NewTree(files, func(f string) ([]byte, error) { return os.ReadFile(filepath.Join(repoRoot, f)) })
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

func TestRepositoryLinks(t *testing.T) {
	tree := repositoryTree(t)
	t.Logf("checked the relative links of %d Markdown files", len(tree.MarkdownFiles()))
	for _, p := range tree.CheckLinks() {
		t.Error(p)
	}
}

func TestRepositoryDocsReachable(t *testing.T) {
	for _, p := range repositoryTree(t).CheckReachable("docs", "README.md", "docs/README.md") {
		t.Error(p)
	}
}

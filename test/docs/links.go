package docs

import (
	"bytes"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"sort"
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/text"

	"github.com/ferry-io/ferry/hack/docgen/md"
)

// Link is one link of a Markdown file.
type Link struct {
	Dest string
	Line int
}

// Problem is a broken link, or a page nothing links to.
type Problem struct {
	File string // repository-relative, slash-separated
	Line int    // 0 when the problem is the file's
	What string
}

func (p Problem) String() string {
	if p.Line == 0 {
		return p.File + ": " + p.What
	}
	return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.What)
}

// markdown parses GitHub-flavoured Markdown (tables, autolinks,
// strikethrough, task lists), as GitHub renders it.
var markdown = goldmark.New(goldmark.WithExtensions(extension.GFM))

// htmlAttr finds href/src/id/name attributes in raw HTML.
var htmlAttr = regexp.MustCompile(`(?i)\b(href|src|id|name)\s*=\s*("([^"]*)"|'([^']*)')`)

// Parsed is what the checks need of one Markdown file.
type Parsed struct {
	Links   []Link
	Anchors map[string]bool
}

// Parse returns the links of a Markdown file and the anchors GitHub gives
// it: one per heading (slugged, duplicates suffixed -1, -2, ...), plus
// explicit HTML id and name attributes.
func Parse(src []byte) Parsed {
	doc := markdown.Parser().Parse(text.NewReader(src))
	out := Parsed{Anchors: map[string]bool{}}
	slugs := newSlugger()
	line := func(offset int) int { return bytes.Count(src[:offset], []byte("\n")) + 1 }
	lineOf := func(n ast.Node) int {
		// An inline's line is its first text's; a block's its first line.
		if r, ok := n.(*ast.RawHTML); ok && r.Segments.Len() > 0 {
			return line(r.Segments.At(0).Start)
		}
		for c := n.FirstChild(); c != nil; c = c.FirstChild() {
			if t, ok := c.(*ast.Text); ok {
				return line(t.Segment.Start)
			}
		}
		for p := n; p != nil; p = p.Parent() {
			if p.Type() == ast.TypeBlock && p.Lines().Len() > 0 {
				return line(p.Lines().At(0).Start)
			}
		}
		return 0
	}
	html := func(s string, line int) {
		for _, m := range htmlAttr.FindAllStringSubmatch(s, -1) {
			v := m[3] + m[4]
			switch strings.ToLower(m[1]) {
			case "href", "src":
				out.Links = append(out.Links, Link{Dest: v, Line: line})
			default:
				out.Anchors[v] = true
			}
		}
	}
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.Heading:
			out.Anchors[slugs.slug(plainText(n, src))] = true
		case *ast.Link:
			out.Links = append(out.Links, Link{Dest: string(n.Destination), Line: lineOf(n)})
		case *ast.Image:
			out.Links = append(out.Links, Link{Dest: string(n.Destination), Line: lineOf(n)})
		case *ast.RawHTML:
			var b strings.Builder
			for i := 0; i < n.Segments.Len(); i++ {
				s := n.Segments.At(i)
				b.Write(s.Value(src))
			}
			html(b.String(), lineOf(n))
		case *ast.HTMLBlock:
			var b strings.Builder
			for i := 0; i < n.Lines().Len(); i++ {
				s := n.Lines().At(i)
				b.Write(s.Value(src))
			}
			html(b.String(), lineOf(n))
		}
		return ast.WalkContinue, nil
	})
	return out
}

// plainText is a heading's text as GitHub slugs it: the text of its
// inlines (code spans and link texts included, markup and HTML dropped).
func plainText(n ast.Node, src []byte) string {
	var b strings.Builder
	var walk func(ast.Node)
	walk = func(n ast.Node) {
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			switch c := c.(type) {
			case *ast.Text:
				b.Write(c.Segment.Value(src))
				if c.SoftLineBreak() || c.HardLineBreak() {
					b.WriteByte(' ')
				}
			case *ast.String:
				b.Write(c.Value)
			case *ast.RawHTML:
			default:
				walk(c)
			}
		}
	}
	walk(n)
	return b.String()
}

// slugger gives GitHub's heading anchors: lower-cased, every character
// that is not a letter, mark, digit, '_', '-' or space dropped, each space
// made '-'; a slug already given gets -1, -2, ... (as github-slugger).
type slugger struct{ seen map[string]int }

func newSlugger() *slugger { return &slugger{seen: map[string]int{}} }

func (s *slugger) slug(heading string) string {
	base := md.Anchor(heading)
	slug := base
	for {
		n, taken := s.seen[slug]
		if !taken {
			break
		}
		s.seen[slug] = n + 1
		slug = fmt.Sprintf("%s-%d", base, n+1)
	}
	s.seen[slug] = 0
	return slug
}

// Tree is a set of repository files: every file (to check a link's
// target exists) and the Markdown ones, parsed.
type Tree struct {
	files map[string]bool // slash-separated, repository-relative
	dirs  map[string]bool
	md    map[string]Parsed
}

// NewTree indexes files (all the repository's files) and parses the
// Markdown ones read by read.
func NewTree(files []string, read func(string) ([]byte, error)) (*Tree, error) {
	t := &Tree{files: map[string]bool{}, dirs: map[string]bool{".": true}, md: map[string]Parsed{}}
	for _, f := range files {
		f = path.Clean(f)
		t.files[f] = true
		for d := path.Dir(f); d != "." && !t.dirs[d]; d = path.Dir(d) {
			t.dirs[d] = true
		}
		if strings.HasSuffix(strings.ToLower(f), ".md") {
			src, err := read(f)
			if err != nil {
				return nil, fmt.Errorf("reading %s: %w", f, err)
			}
			t.md[f] = Parse(src)
		}
	}
	return t, nil
}

// MarkdownFiles is every Markdown file of the tree, sorted.
func (t *Tree) MarkdownFiles() []string {
	out := make([]string, 0, len(t.md))
	for f := range t.md {
		out = append(out, f)
	}
	sort.Strings(out)
	return out
}

// target resolves a link of file: the repository file or directory it
// points at (empty for a link that leaves the repository), its fragment,
// and a problem if the link is not a usable relative link.
func (t *Tree) target(file, dest string) (target, fragment, problem string) {
	if dest == "" {
		return "", "", "empty link"
	}
	u, err := url.Parse(dest)
	if err != nil {
		return "", "", fmt.Sprintf("link %q does not parse: %v", dest, err)
	}
	if u.Scheme != "" || u.Host != "" || strings.HasPrefix(dest, "//") {
		return "", "", "" // leaves the repository: not checked here
	}
	fragment = u.Fragment
	if u.Path == "" {
		return file, fragment, ""
	}
	if strings.HasPrefix(u.Path, "/") {
		return "", "", fmt.Sprintf("link %q is absolute: links between repository files are relative", dest)
	}
	target = path.Clean(path.Join(path.Dir(file), u.Path))
	if target == ".." || strings.HasPrefix(target, "../") {
		return "", "", fmt.Sprintf("link %q leaves the repository", dest)
	}
	return target, fragment, ""
}

// CheckLinks reports every relative link of a Markdown file whose target
// file or directory does not exist, or whose #anchor the target Markdown
// file does not have.
func (t *Tree) CheckLinks() []Problem {
	var out []Problem
	for _, f := range t.MarkdownFiles() {
		for _, l := range t.md[f].Links {
			target, fragment, problem := t.target(f, l.Dest)
			if problem != "" {
				out = append(out, Problem{File: f, Line: l.Line, What: problem})
				continue
			}
			if target == "" {
				continue
			}
			if !t.files[target] && !t.dirs[target] {
				out = append(out, Problem{File: f, Line: l.Line, What: fmt.Sprintf("link %q: %s does not exist", l.Dest, target)})
				continue
			}
			if fragment == "" {
				continue
			}
			p, ok := t.md[target]
			if !ok {
				continue // an anchor of a source file (#L10) or a directory
			}
			if !p.Anchors[fragment] {
				out = append(out, Problem{File: f, Line: l.Line, What: fmt.Sprintf("link %q: %s has no anchor #%s", l.Dest, target, fragment)})
			}
		}
	}
	return out
}

// CheckReachable reports every Markdown file under dir (e.g. "docs") that
// no chain of relative links from the roots reaches. A link to a
// directory reaches its README.md.
func (t *Tree) CheckReachable(dir string, roots ...string) []Problem {
	reached := map[string]bool{}
	var queue []string
	for _, r := range roots {
		if _, ok := t.md[r]; ok && !reached[r] {
			reached[r] = true
			queue = append(queue, r)
		}
	}
	for len(queue) > 0 {
		f := queue[0]
		queue = queue[1:]
		for _, l := range t.md[f].Links {
			target, _, problem := t.target(f, l.Dest)
			if problem != "" || target == "" {
				continue
			}
			if t.dirs[target] {
				target = path.Join(target, "README.md")
			}
			if _, ok := t.md[target]; ok && !reached[target] {
				reached[target] = true
				queue = append(queue, target)
			}
		}
	}
	var out []Problem
	for _, f := range t.MarkdownFiles() {
		if (f == dir || strings.HasPrefix(f, dir+"/")) && !reached[f] {
			out = append(out, Problem{File: f, What: fmt.Sprintf("not reachable by links from %s", strings.Join(roots, " or "))})
		}
	}
	return out
}

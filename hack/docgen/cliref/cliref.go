// Package cliref writes the reference of a cobra command tree with cobra's
// Markdown generator: one page per command, named by its path
// (ferryctl.md, ferryctl_peer.md, ...), without the generator's dated
// footer, so the pages change only when the commands do.
package cliref

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// Write writes the pages of root and every command under it into dir, with
// header at the top of each, and returns the pages' names, root's first,
// then in name order (every page in dir: give it an empty one). The commands cobra adds when it runs (the root's
// --version, completion) are added first, so that the pages list what a
// user can type.
func Write(root *cobra.Command, dir, header string) ([]string, error) {
	root.InitDefaultVersionFlag()
	root.InitDefaultCompletionCmd()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.DisableAutoGenTag = true
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	prepend := func(string) string { return header }
	link := func(name string) string { return name }
	if err := doc.GenMarkdownTreeCustom(root, dir, prepend, link); err != nil {
		return nil, fmt.Errorf("cobra's markdown generator: %w", err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		return nil, err
	}
	rootPage := Page(root)
	pages := []string{rootPage}
	for _, f := range files {
		if name := filepath.Base(f); name != rootPage {
			pages = append(pages, name)
		}
	}
	slices.Sort(pages[1:])
	return pages, nil
}

// Page is the file name of c's page, as cobra names it.
func Page(c *cobra.Command) string {
	return strings.ReplaceAll(c.CommandPath(), " ", "_") + ".md"
}

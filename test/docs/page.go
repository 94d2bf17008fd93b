package docs

import (
	"sort"
	"strings"

	"github.com/yuin/goldmark/ast"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/text"
)

// DocumentedReasons is every reason a Markdown page explains: the code
// spans of the first cell of each body row (`Reason` or `ReasonA`,
// `ReasonB` when one explanation serves several) of the tables whose first
// column is headed "Reason".
func DocumentedReasons(src []byte) map[string]bool {
	doc := markdown.Parser().Parse(text.NewReader(src))
	out := map[string]bool{}
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		if table, ok := n.(*east.Table); ok {
			head, _ := table.FirstChild().(*east.TableHeader)
			if head == nil || head.FirstChild() == nil || strings.TrimSpace(plainText(head.FirstChild(), src)) != "Reason" {
				return ast.WalkSkipChildren, nil
			}
			return ast.WalkContinue, nil
		}
		row, ok := n.(*east.TableRow)
		if !ok {
			return ast.WalkContinue, nil
		}
		if cell := row.FirstChild(); cell != nil {
			for c := cell.FirstChild(); c != nil; c = c.NextSibling() {
				if cs, ok := c.(*ast.CodeSpan); ok {
					out[plainText(cs, src)] = true
				}
			}
		}
		return ast.WalkSkipChildren, nil
	})
	return out
}

// Compare is the reasons the code emits that the page does not explain
// (missing), and those the page explains that the code no longer emits
// (stale), each sorted.
func Compare(c *Collection, documented map[string]bool) (missing, stale []string) {
	for v := range c.Reasons {
		if !documented[v] {
			missing = append(missing, v)
		}
	}
	for v := range documented {
		if c.Reasons[v] == nil {
			stale = append(stale, v)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	return missing, stale
}

// Package md writes the bits of GitHub-flavoured Markdown the reference
// pages are made of: tables whose cells hold any text, and code spans.
package md

import (
	"fmt"
	"io"
	"strings"
	"unicode"
)

// Cell makes text fit a table cell: whitespace runs (new lines included)
// become one space and pipes are escaped, which GitHub honours in code
// spans too.
func Cell(text string) string {
	text = strings.Join(strings.Fields(text), " ")
	return strings.ReplaceAll(text, "|", `\|`)
}

// Code is text as a code span, with enough backticks around it to hold
// the backticks it contains; empty text is an empty string's literal.
func Code(text string) string {
	if text == "" {
		return "`\"\"`"
	}
	fence := "`"
	for strings.Contains(text, fence) {
		fence += "`"
	}
	if strings.HasPrefix(text, "`") || strings.HasSuffix(text, "`") {
		return fence + " " + text + " " + fence
	}
	return fence + text + fence
}

// Table writes a table of header and rows; every cell goes through Cell.
func Table(w io.Writer, header []string, rows [][]string) {
	line := func(cells []string) {
		escaped := make([]string, len(cells))
		for i, c := range cells {
			escaped[i] = Cell(c)
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(escaped, " | "))
	}
	line(header)
	sep := make([]string, len(header))
	for i := range sep {
		sep[i] = "---"
	}
	fmt.Fprintf(w, "|%s|\n", strings.Join(sep, "|"))
	for _, r := range rows {
		line(r)
	}
}

// Anchor is the fragment GitHub gives a heading of this text (the first
// one: later duplicates get -1, -2, ...): lower case, each space made '-',
// every rune but letters, marks, digits, '-' and '_' dropped, as
// github-slugger does. test/docs checks links against the same rule.
func Anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

package docs

import (
	"fmt"
	"regexp"
	"strings"
)

// shellInfo are the fenced code blocks' info strings of commands a user
// would paste.
var shellInfo = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true}

// runByLabel finds the ginkgo label a run-by note names
// (make test-e2e LABELS=<label>).
var runByLabel = regexp.MustCompile(`LABELS=([A-Za-z0-9_-]+)`)

const (
	illustrativeMark = "*Illustrative:*"
	runByPrefix      = "<!-- run by:"
)

// CheckSnippets checks that every shell block of a page is either marked
// illustrative (the paragraph right before it starts with
// "*Illustrative:*") or followed (blank lines aside) by a
// "<!-- run by: ... -->" note naming
// what runs it; a note naming an e2e label (LABELS=x) must name one that
// labels exists for.
func CheckSnippets(file string, src []byte, labels map[string]bool) []Problem {
	var problems []Problem
	lines := strings.Split(string(src), "\n")
	for i := 0; i < len(lines); i++ {
		fence, info, ok := openingFence(lines[i])
		if !ok {
			continue
		}
		start := i
		end := len(lines) - 1
		for j := i + 1; j < len(lines); j++ {
			if strings.HasPrefix(strings.TrimSpace(lines[j]), fence) {
				end = j
				break
			}
		}
		i = end
		if !shellInfo[info] {
			continue
		}
		// The note may follow blank lines, as framework.ShellSteps, which
		// runs the examples' marked blocks, reads it.
		note, noteLine := "", end+1
		for noteLine < len(lines) && strings.TrimSpace(lines[noteLine]) == "" {
			noteLine++
		}
		if noteLine < len(lines) {
			note = strings.TrimSpace(lines[noteLine])
		}
		switch {
		case strings.HasPrefix(note, runByPrefix):
			for _, m := range runByLabel.FindAllStringSubmatch(note, -1) {
				if !labels[m[1]] {
					problems = append(problems, Problem{File: file, Line: noteLine + 1,
						What: fmt.Sprintf("the run-by note names e2e label %q, which no spec has", m[1])})
				}
			}
		case strings.HasPrefix(precedingParagraph(lines, start), illustrativeMark):
		default:
			problems = append(problems, Problem{File: file, Line: start + 1,
				What: fmt.Sprintf("a %s block neither marked %q in the paragraph before it nor followed by %q naming the test that runs it", info, illustrativeMark, runByPrefix+" ... -->")})
		}
	}
	return problems
}

// openingFence tells whether line opens a fenced code block, with its
// fence and info string's first word.
func openingFence(line string) (fence, info string, ok bool) {
	t := strings.TrimSpace(line)
	for _, f := range []string{"```", "~~~"} {
		if strings.HasPrefix(t, f) {
			rest := strings.TrimLeft(t, f[:1])
			fields := strings.Fields(rest)
			if len(fields) > 0 {
				info = fields[0]
			}
			return t[:len(t)-len(rest)], info, true
		}
	}
	return "", "", false
}

// precedingParagraph is the first line of the paragraph that ends right
// before line i (blank lines between skipped).
func precedingParagraph(lines []string, i int) string {
	j := i - 1
	for j >= 0 && strings.TrimSpace(lines[j]) == "" {
		j--
	}
	first := ""
	for ; j >= 0 && strings.TrimSpace(lines[j]) != ""; j-- {
		first = strings.TrimSpace(lines[j])
	}
	return first
}

// labelCall finds ginkgo Label(...) calls.
var labelCall = regexp.MustCompile(`Label\(([^)]*)\)`)

// quoted finds the string literals in a Label call's arguments.
var quoted = regexp.MustCompile(`"([^"]+)"`)

// E2ELabels collects the labels ginkgo Label(...) calls in src give.
func E2ELabels(src []byte, into map[string]bool) {
	for _, call := range labelCall.FindAllSubmatch(src, -1) {
		for _, q := range quoted.FindAllSubmatch(call[1], -1) {
			into[string(q[1])] = true
		}
	}
}

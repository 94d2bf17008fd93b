package framework

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// RunByMarker follows a fenced shell block in a Markdown page whose commands
// a test runs as they are written (see ShellSteps).
const RunByMarker = "<!-- run by: test/e2e/examples_test.go -->"

// ShellSteps reads a Markdown page and returns, in order, the commands of
// each ```sh block that the next non-blank line after it marks with
// RunByMarker: one step per block, one []string of arguments per command.
// Blank lines and comments (# to the end of the line) are dropped. Each
// command must be a kubectl command without quotes or shell syntax, so
// that splitting it on spaces gives what a shell would pass; anything else
// is an error naming the line, rather than a command silently not run.
func ShellSteps(r io.Reader) ([][][]string, error) {
	var (
		steps   [][][]string
		block   []string // lines of the open block, or of the last closed one
		start   int      // line number of the block's first line
		inBlock bool
		pending bool // a closed ```sh block waits for its marker
		lineNo  int
	)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case inBlock && trimmed == "```":
			inBlock, pending = false, true
		case inBlock:
			block = append(block, line)
		case pending && trimmed == "":
		case pending && trimmed == RunByMarker:
			pending = false
			cmds, err := commands(block, start)
			if err != nil {
				return nil, err
			}
			if len(cmds) == 0 {
				return nil, fmt.Errorf("line %d: the block marked run by a test holds no command", lineNo)
			}
			steps = append(steps, cmds)
		case strings.HasPrefix(trimmed, "```"):
			pending = false
			if trimmed == "```sh" || trimmed == "```shell" || trimmed == "```console" {
				inBlock, block, start = true, nil, lineNo+1
			} else {
				// Another language's block, or one without: skip it whole.
				if err := skipBlock(sc, &lineNo); err != nil {
					return nil, err
				}
			}
		default:
			pending = false
			if strings.Contains(trimmed, RunByMarker) {
				return nil, fmt.Errorf("line %d: %s follows no ```sh block", lineNo, RunByMarker)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read page: %w", err)
	}
	if inBlock {
		return nil, fmt.Errorf("line %d: a ```sh block is not closed", start-1)
	}
	return steps, nil
}

// skipBlock reads up to the end of a fenced block whose opening line was
// just read.
func skipBlock(sc *bufio.Scanner, lineNo *int) error {
	open := *lineNo
	for sc.Scan() {
		*lineNo++
		if strings.TrimSpace(sc.Text()) == "```" {
			return nil
		}
	}
	return fmt.Errorf("line %d: a fenced block is not closed", open)
}

// commands splits a block's lines, the first being line start, into
// kubectl commands.
func commands(lines []string, start int) ([][]string, error) {
	var out [][]string
	for i, line := range lines {
		if c := strings.Index(line, "#"); c >= 0 {
			line = line[:c]
		}
		line = strings.TrimPrefix(strings.TrimSpace(line), "$ ")
		if line == "" {
			continue
		}
		if strings.ContainsAny(line, "'\"`$|;&<>\\") {
			return nil, fmt.Errorf("line %d: %q: a command run by the test holds no quotes or shell syntax", start+i, line)
		}
		args := strings.Fields(line)
		if args[0] != "kubectl" {
			return nil, fmt.Errorf("line %d: %q: only kubectl commands are run by the test", start+i, line)
		}
		out = append(out, args[1:])
	}
	return out, nil
}

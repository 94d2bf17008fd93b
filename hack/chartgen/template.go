package main

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// templater turns manifest objects into Helm templates structurally: a
// field that takes a value from the chart's values is set, in the object, to
// a token standing for a template expression; the object is marshalled as
// YAML; only then is each token replaced by its expression. Tokens are
// letters, digits and dashes, so YAML never quotes or splits them.
type templater struct {
	n int
	// values: token -> expression, printed as {{ expr }} where the token is.
	values map[string]string
	// blocks: token -> expression of a map or list, printed indented under
	// its key with toYaml.
	blocks map[string]string
	// items: token -> list items guarded or repeated by template actions.
	items map[string]item
	// includes: token (a map key) -> a named template of map entries.
	includes map[string]string
}

// item is a list entry that a template action guards (if/with) or repeats
// (range): the entry is printed between open and end.
type item struct{ open, entry string }

func newTemplater() *templater {
	return &templater{values: map[string]string{}, blocks: map[string]string{}, items: map[string]item{}, includes: map[string]string{}}
}

func (t *templater) token(kind string) string {
	t.n++
	return fmt.Sprintf("ferrytpl-%s-%d", kind, t.n)
}

// Value stands for the scalar {{ expr }}, alone or inside a string.
func (t *templater) Value(expr string) string {
	tok := t.token("v")
	t.values[tok] = expr
	return tok
}

// Block stands for a map or list value: toYaml of expr, under the key.
func (t *templater) Block(expr string) string {
	tok := t.token("b")
	t.blocks[tok] = expr
	return tok
}

// Item stands for a list entry printed inside the action open
// (e.g. `if .Values.x`, `range .Values.y`) and its end.
func (t *templater) Item(open, entry string) string {
	tok := t.token("i")
	t.items[tok] = item{open: open, entry: entry}
	return tok
}

// IncludeKey stands for a map key whose line becomes the entries of the
// named template (such as labels).
func (t *templater) IncludeKey(name string) string {
	tok := t.token("k")
	t.includes[tok] = name
	return tok
}

// escapeActions makes every "{{" in the strings of obj print as itself
// (dashboards' legend formats, for one), not start an action.
func (t *templater) escapeActions(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = t.escapeActions(e)
		}
	case []any:
		for i, e := range v {
			v[i] = t.escapeActions(e)
		}
	case string:
		switch {
		case !strings.Contains(v, "{{"):
		case strings.Contains(v, "\n"):
			// A block scalar: its lines are text whatever they start with.
			return strings.ReplaceAll(v, "{{", t.Value(`"{{"`))
		default:
			// The whole string, quoted by the template: a token in its place
			// would let YAML print it plain, and "{{x}}" plain is a map.
			return t.Value(strconv.Quote(v) + " | quote")
		}
	}
	return v
}

var (
	blockLine   = regexp.MustCompile(`^(\s*)(- )?([^\s:]+): (ferrytpl-b-\d+)$`)
	itemLine    = regexp.MustCompile(`^(\s*)- (ferrytpl-i-\d+)$`)
	includeLine = regexp.MustCompile(`^(\s*)(ferrytpl-k-\d+): ""$`)
	valueToken  = regexp.MustCompile(`ferrytpl-v-\d+`)
)

// Marshal prints obj as YAML with every token replaced by its template.
func (t *templater) Marshal(obj map[string]any) (string, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(obj); err != nil {
		return "", err
	}
	if err := enc.Close(); err != nil {
		return "", err
	}
	var out strings.Builder
	for _, line := range strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n") {
		switch {
		case blockLine.MatchString(line):
			m := blockLine.FindStringSubmatch(line)
			indent := len(m[1]) + len(m[2]) + 2
			fmt.Fprintf(&out, "%s%s%s:\n%s{{- toYaml %s | nindent %d }}\n", m[1], m[2], m[3], strings.Repeat(" ", indent), t.blocks[m[4]], indent)
		case itemLine.MatchString(line):
			m := itemLine.FindStringSubmatch(line)
			it := t.items[m[2]]
			fmt.Fprintf(&out, "%s{{- %s }}\n%s- %s\n%s{{- end }}\n", m[1], it.open, m[1], it.entry, m[1])
		case includeLine.MatchString(line):
			m := includeLine.FindStringSubmatch(line)
			fmt.Fprintf(&out, "%s{{- include %s . | nindent %d }}\n", m[1], strconv.Quote(t.includes[m[2]]), len(m[1]))
		default:
			out.WriteString(line)
			out.WriteByte('\n')
		}
	}
	text := valueToken.ReplaceAllStringFunc(out.String(), func(tok string) string {
		return "{{ " + t.values[tok] + " }}"
	})
	if strings.Contains(text, "ferrytpl-") {
		return "", fmt.Errorf("a template token was left in the output (a token in a place it cannot be replaced):\n%s", text)
	}
	return text, nil
}

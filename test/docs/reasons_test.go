package docs

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// writeModule writes files (path -> content) as a module example.com/m.
func writeModule(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	files["go.mod"] = "module example.com/m\n\ngo 1.26\n"
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// The fixture writes reasons in every way ferry's code does.
var reasonFixture = map[string]string{
	"api/types.go": `package api
const (
	MoveReasonMoved = "Moved"           // reaches a condition through a helper in another package
	MoveReasonUnused = "DeclaredOnly"   // named as a reason, emitted nowhere yet
	LabelSomething = "not-a-reason"
)
`,
	"ctrl/conditions.go": `package ctrl
import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"example.com/m/api"
)
const (
	ReasonLiteralConst = "ConstInLiteral"
	reasonLower = "LowerCaseConst"
	ReasonSentence = "a sentence is a message, not a reason"
	aliased = ReasonLiteralConst
)
type refusal struct{ reason, msg string }
func refuse(reason, msg string) *refusal { return &refusal{reason: reason, msg: msg} }
type R struct{ recorder interface{}; Recorder interface{} }
func f(conds *[]metav1.Condition, err error) {
	meta.SetStatusCondition(conds, metav1.Condition{Type: "Ready", Reason: ReasonLiteralConst})
	_ = corev1.NodeCondition{Type: "MemoryPressure", Reason: reasonLower}
	cond := metav1.Condition{}
	cond.Status, cond.Reason = metav1.ConditionTrue, "AssignedLiteral"
	cond.Status, cond.Reason, cond.Message = multi()
	set := func(t string, reason, msg string) {
		meta.SetStatusCondition(conds, metav1.Condition{Type: t, Reason: reason, Message: msg})
	}
	set("A", "ViaClosure", "")
	reason := "LocalFirst"
	if err != nil {
		reason = aliased
	}
	setCond(conds, reason)
	setCond(conds, api.MoveReasonMoved)
	cond.Reason = string(metav1.StatusReasonInvalid) // another module's: dynamic
	ref := refuse("ViaStructField", "no")
	var r R
	r.event(nil, corev1.EventTypeWarning, ref.reason, ref.msg)
	r.recorder.Event(nil, corev1.EventTypeNormal, "OldEvent", "msg")
	r.recorder.Eventf(nil, corev1.EventTypeWarning, "OldEventf", "%s", "x")
	r.recorder.AnnotatedEventf(nil, nil, corev1.EventTypeWarning, "Annotated", "%s", "x")
	r.Recorder.Eventf(nil, nil, corev1.EventTypeNormal, "NewEventf", "Act", "%s", "x")
	r.Recorder.Eventf(nil, obj(), corev1.EventTypeNormal, "NewEventfRelated", "Act", "note")
	kind := corev1.EventTypeNormal
	if err != nil {
		kind = corev1.EventTypeWarning
	}
	r.recorder.Event(nil, kind, "TypeInVariable", "msg")
	r.recorder.Event(nil, pickType(), "Unclassified", "msg")
}
func multi() (metav1.ConditionStatus, string, string) {
	if true {
		return metav1.ConditionFalse, "FromMultiReturn", "m"
	}
	return metav1.ConditionTrue, ReasonLiteralConst, ""
}
func setCond(conds *[]metav1.Condition, why string) {
	meta.SetStatusCondition(conds, metav1.Condition{Type: "B", Reason: why})
}
func (r *R) event(obj interface{}, eventType, reason, msg string) {
	r.Recorder.Eventf(obj, nil, eventType, reason, "Do", "%s", msg)
}
func obj() interface{} { return nil }
func pickType() string { return "" }
`,
	"ctrl/status.go": `package ctrl
import corev1 "k8s.io/api/core/v1"
func podStatus(st *corev1.PodStatus) { st.Reason = "PodStatusReason" }
`,
	"ctrl/ignored_test.go": `package ctrl
import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
var _ = metav1.Condition{Reason: "InATestFile"}
`,
	"test/e2e/e2e.go": `package e2e
import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
var _ = metav1.Condition{Reason: "InTheTestTree"}
`,
	"mover/report.go": `package mover
type FailedError struct{ Reason string }
var _ = &FailedError{Reason: "NotACondition"}
`,
}

func TestCollectReasonsFixture(t *testing.T) {
	c, err := CollectReasons(writeModule(t, reasonFixture))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range c.Sorted() {
		var kinds []string
		for k := range r.Kinds {
			kinds = append(kinds, string(k))
		}
		sort.Strings(kinds)
		got[r.Value] = strings.Join(kinds, ",")
	}
	want := map[string]string{
		"ConstInLiteral":   "condition",
		"LowerCaseConst":   "condition",
		"AssignedLiteral":  "condition",
		"FromMultiReturn":  "condition",
		"ViaClosure":       "condition",
		"LocalFirst":       "condition",
		"Moved":            "condition",
		"PodStatusReason":  "condition",
		"ViaStructField":   "event",
		"OldEvent":         "event",
		"OldEventf":        "event",
		"Annotated":        "event",
		"NewEventf":        "event",
		"NewEventfRelated": "event",
		"TypeInVariable":   "event",
		"DeclaredOnly":     "declared",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("reasons:\n got %v\nwant %v", got, want)
	}
	if len(c.Unclassified) != 1 || !strings.HasPrefix(c.Unclassified[0], "ctrl/conditions.go:") {
		t.Errorf("unclassified event calls = %v, want the one passing pickType()", c.Unclassified)
	}
	if len(c.Dynamic) == 0 {
		t.Errorf("no dynamic site: string(metav1.StatusReasonInvalid) is one")
	}
}

const pageFixture = "# Troubleshooting\n\nThe `NotInTable` reason is only mentioned in prose.\n\n" +
	"| Reason | Meaning |\n|---|---|\n" +
	"| `Moved` | the claim moved |\n" +
	"| `OldEvent`, `NewEventf` | events |\n" +
	"| `Gone` | the code no longer says it |\n" +
	"| plain text | `InSecondCell` |\n\n" +
	"| Condition | Meaning |\n|---|---|\n| `ResourcesGranted` | another table's first column |\n"

func TestCompareFixture(t *testing.T) {
	documented := DocumentedReasons([]byte(pageFixture))
	if want := map[string]bool{"Moved": true, "OldEvent": true, "NewEventf": true, "Gone": true}; !reflect.DeepEqual(documented, want) {
		t.Errorf("documented = %v, want %v", documented, want)
	}
	c := &Collection{Reasons: map[string]*Reason{}}
	for _, v := range []string{"Moved", "OldEvent", "NewEventf", "NotInTable", "Fenced"} {
		c.Reasons[v] = &Reason{Value: v}
	}
	missing, stale := Compare(c, documented)
	if want := []string{"Fenced", "NotInTable"}; !reflect.DeepEqual(missing, want) {
		t.Errorf("missing = %v, want %v", missing, want)
	}
	if want := []string{"Gone"}; !reflect.DeepEqual(stale, want) {
		t.Errorf("stale = %v, want %v", stale, want)
	}
}

// TestEveryReasonDocumented: every reason ferry's code emits has a row in
// docs/operations/troubleshooting.md, and every row is a reason it emits.
func TestEveryReasonDocumented(t *testing.T) {
	c, err := CollectReasons(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d reasons: %d of conditions, %d of events, %d declared only; %d sites computed at run time",
		len(c.Reasons), c.Count(KindCondition), c.Count(KindEvent), c.Count(KindDeclared), len(c.Dynamic))
	for _, site := range c.Unclassified {
		t.Errorf("%s: an event recorder call whose reason argument the collector cannot find: teach eventReasonIndex its shape", site)
	}
	const page = "docs/operations/troubleshooting.md"
	src, err := os.ReadFile(filepath.Join(repoRoot, page))
	if err != nil {
		t.Fatal(err)
	}
	missing, stale := Compare(c, DocumentedReasons(src))
	for _, v := range missing {
		r := c.Reasons[v]
		var kinds []string
		for k := range r.Kinds {
			kinds = append(kinds, string(k))
		}
		sort.Strings(kinds)
		t.Errorf("%s: reason %s (%s, %s) has no row in the reason table", page, v, strings.Join(kinds, ","), strings.Join(r.Sites, " "))
	}
	for _, v := range stale {
		t.Errorf("%s: the table explains %s, which the code no longer emits", page, v)
	}
}

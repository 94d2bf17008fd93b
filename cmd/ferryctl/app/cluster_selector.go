package app

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/ferry-io/ferry/api/placement"
)

// ParseClusterSelector turns a label selector, as kubectl -l takes it
// (`region=eu,tier in (a,b),!gpu`), into the clusterSelector of a
// NamespaceOffloading: one NodeSelectorTerm whose expressions, ANDed, must
// all match a provider's virtual node. = and == become In, != becomes NotIn
// (also matching nodes without the label, as in label selectors), `key` and
// `!key` become Exists and DoesNotExist, > and < become Gt and Lt. Empty
// selects every provider (nil). Errors name the flag.
func ParseClusterSelector(s string) (*corev1.NodeSelector, error) {
	sel, err := labels.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("--cluster-selector %q: %w", s, err)
	}
	reqs, _ := sel.Requirements()
	var term corev1.NodeSelectorTerm
	for _, r := range reqs {
		e := corev1.NodeSelectorRequirement{Key: r.Key(), Values: r.Values().List()}
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			e.Operator = corev1.NodeSelectorOpIn
		case selection.NotEquals, selection.NotIn:
			e.Operator = corev1.NodeSelectorOpNotIn
		case selection.Exists:
			e.Operator, e.Values = corev1.NodeSelectorOpExists, nil
		case selection.DoesNotExist:
			e.Operator, e.Values = corev1.NodeSelectorOpDoesNotExist, nil
		case selection.GreaterThan:
			e.Operator = corev1.NodeSelectorOpGt
		case selection.LessThan:
			e.Operator = corev1.NodeSelectorOpLt
		default:
			return nil, fmt.Errorf("--cluster-selector %q: operator %q is not supported (use =, ==, !=, in, notin, key, !key, >, <)", s, r.Operator())
		}
		term.MatchExpressions = append(term.MatchExpressions, e)
	}
	if len(term.MatchExpressions) == 0 {
		return nil, nil
	}
	ns := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term}}
	if _, err := placement.NewClusterSelector(ns); err != nil {
		return nil, fmt.Errorf("--cluster-selector %q: %w", s, err)
	}
	return ns, nil
}

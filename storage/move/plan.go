// Package move is the controller of VolumeMoves: it moves the data of a
// claim of ferry's storage class to another cluster (this one or a
// provider) with two short-lived pods of ferry-volume-mover, a serve pod
// where the data is and a fetch pod where it goes (and a relay in this
// cluster between two providers), verifies it by SHA-256, and only then
// re-points the claim: it is made again under its name, bound to a volume
// standing for the copy, so the next pod of the claim runs there. The
// source is kept until the move is confirmed (or reverted), unless the
// move asked for it to be deleted.
//
// This file holds the pure rules: what refuses a move, what the copy
// reports, where a pod is reached from another cluster.
package move

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/fabric"
)

// Progress is one line the fetch pod prints, about once a second.
type Progress struct {
	Bytes          int64 `json:"bytes"`
	TotalBytes     int64 `json:"totalBytes"`
	BytesPerSecond int64 `json:"bytesPerSecond"`
	EtaSeconds     int64 `json:"etaSeconds"`
}

// ParseProgress reads the last progress line of a fetch pod's log; ok is
// false when the log holds none yet.
func ParseProgress(log string) (p Progress, ok bool) {
	lines := strings.Split(strings.TrimSpace(log), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		line := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var got Progress
		// etaSeconds is -1 while unknown (nothing copied yet).
		if err := json.Unmarshal([]byte(line), &got); err != nil || got.Bytes < 0 || got.TotalBytes < 0 || got.BytesPerSecond < 0 || got.EtaSeconds < -1 {
			continue
		}
		return got, true
	}
	return Progress{}, false
}

// Result is what a fetch pod that succeeded writes to its termination log.
type Result struct {
	Bytes  int64  `json:"bytes"`
	Files  int64  `json:"files"`
	SHA256 string `json:"sha256"`
}

// ParseResult reads a successful fetch's termination message; an error
// says why it is no proof of a verified copy.
func ParseResult(msg string) (Result, error) {
	var r Result
	if err := json.Unmarshal([]byte(strings.TrimSpace(msg)), &r); err != nil {
		return Result{}, fmt.Errorf("termination message %q: %w", shorten(msg), err)
	}
	if len(r.SHA256) != 64 || strings.Trim(strings.ToLower(r.SHA256), "0123456789abcdef") != "" {
		return Result{}, fmt.Errorf("termination message %q: no SHA-256 digest", shorten(msg))
	}
	if r.Bytes < 0 || r.Files < 0 {
		return Result{}, fmt.Errorf("termination message %q: negative counts", shorten(msg))
	}
	return r, nil
}

func shorten(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// PodsUsing names the pods of pods (one namespace) that use claim and have
// not ended, sorted.
func PodsUsing(pods []corev1.Pod, claim string) []string {
	var names []string
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if slices.ContainsFunc(p.Spec.Volumes, func(v corev1.Volume) bool {
			return v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim
		}) {
			names = append(names, p.Name)
		}
	}
	slices.Sort(names)
	return names
}

// ActiveMoveBefore is the move of the same claim that holds it ahead of
// mv: one not done, created before it (by name when created together);
// nil when mv may go.
func ActiveMoveBefore(moves []ferryv1alpha1.VolumeMove, mv *ferryv1alpha1.VolumeMove) *ferryv1alpha1.VolumeMove {
	var first *ferryv1alpha1.VolumeMove
	for i := range moves {
		o := &moves[i]
		if o.UID == mv.UID || o.Spec.ClaimName != mv.Spec.ClaimName || o.Status.Phase.Done() || !o.DeletionTimestamp.IsZero() {
			continue
		}
		// A move that has started holds the claim, whenever it was made.
		started := o.Status.Phase != "" && o.Status.Phase != ferryv1alpha1.MovePending
		earlier := o.CreationTimestamp.Before(&mv.CreationTimestamp) ||
			(o.CreationTimestamp.Equal(&mv.CreationTimestamp) && o.Name < mv.Name)
		if !started && !earlier {
			continue
		}
		if first == nil || o.CreationTimestamp.Before(&first.CreationTimestamp) {
			first = o
		}
	}
	return first
}

// Translate maps ip, an address of the CIDR from, to the address at the
// same offset in to (a CIDR of the same size): where another cluster
// reaches a pod, given the pod's cluster's range and where the other
// cluster sees it. The arithmetic is the fabric's (fabric.Mapping); errors
// name what is at fault.
func Translate(ip, from, to string) (string, error) {
	f, err := netip.ParsePrefix(from)
	if err != nil {
		return "", fmt.Errorf("range %q: %w", from, err)
	}
	t, err := netip.ParsePrefix(to)
	if err != nil {
		return "", fmt.Errorf("range %q: %w", to, err)
	}
	m, err := fabric.NewMapping(f.Masked(), t.Masked())
	if err != nil {
		return "", err
	}
	out, ok := m.TranslateString(ip)
	if !ok {
		return "", fmt.Errorf("address %q is not in %s", ip, m.From)
	}
	return out, nil
}

// Route says which pods a copy runs where: the serve pod in the source
// cluster, the fetch pod in the target's, and a relay in this cluster when
// both are providers (their pod networks reach this cluster's, not each
// other's).
type Route struct {
	Source, Target ferryv1alpha1.ClusterID
	Relay          bool
}

// RouteOf is the route of a move from source to target seen from local.
func RouteOf(local, source, target ferryv1alpha1.ClusterID) Route {
	return Route{Source: source, Target: target, Relay: source != local && target != local}
}

// Pods that end on their own with a reason the copy can be restarted for.
func podGone(p *corev1.Pod) bool {
	return p == nil || p.Status.Phase == corev1.PodFailed || !p.DeletionTimestamp.IsZero()
}

// terminated is the message of the pod's first container that ended.
func terminated(p *corev1.Pod) (msg string, exitCode int32, ok bool) {
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			return t.Message, t.ExitCode, true
		}
	}
	return "", 0, false
}

// podIPReady is the pod's IP once it runs and is Ready.
func podIPReady(p *corev1.Pod) (string, bool) {
	if p == nil || p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
		return "", false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return p.Status.PodIP, c.Status == corev1.ConditionTrue
		}
	}
	return "", false
}

// unschedulable is the scheduler's message for a pod it cannot place.
func unschedulable(p *corev1.Pod) (string, bool) {
	if p == nil {
		return "", false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return c.Message, true
		}
	}
	return "", false
}

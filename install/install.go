package install

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// FieldManager owns the fields ferryctl install applies.
	FieldManager = "ferryctl"
	// LabelManagedBy and ManagedBy mark every object an install applied.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "ferryctl"
)

// Installer applies and removes ferry's objects in one cluster.
type Installer struct {
	// Client reaches the cluster; its RESTMapper must find kinds whose CRDs
	// the install itself adds (controller-runtime's default one does).
	Client client.Client
	// Out gets one progress line per step.
	Out io.Writer
	// Namespace holds the inventory (ferry-system).
	Namespace string
	// Poll is the interval of the readiness and deletion checks (default 1 s).
	Poll time.Duration
}

// Options tune an install.
type Options struct {
	// Version is recorded in the inventory.
	Version string
	// Wait waits for the workloads to be ready, for at most Timeout, once
	// every object is applied (admission configurations included: a
	// webhook may become ready only once its configurations exist). CRDs
	// are always waited for, right after they are applied: the objects
	// after them may be of their kinds.
	Wait    bool
	Timeout time.Duration
}

// Result counts what an install did.
type Result struct {
	Created, Changed, Unchanged, Pruned int
}

func (i *Installer) poll() time.Duration {
	if i.Poll > 0 {
		return i.Poll
	}
	return time.Second
}

func (i *Installer) printf(format string, args ...any) {
	fmt.Fprintf(i.Out, format, args...)
}

// Install applies objs by server-side apply, step by step, records them in
// the inventory, prunes what the previous install created and objs no
// longer hold, and waits for readiness. Applying the same objects again
// changes nothing (Result.Unchanged counts them).
func (i *Installer) Install(ctx context.Context, objs []*unstructured.Unstructured, opts Options) (Result, error) {
	var res Result
	if opts.Timeout <= 0 {
		return res, errors.New("install: the timeout must be positive")
	}
	prev, err := readInventory(ctx, i.Client, i.Namespace)
	if err != nil {
		return res, err
	}
	inv := &Inventory{Namespace: i.Namespace, Version: opts.Version}
	steps := bySteps(objs)
	var planned [nSteps][]planned
	for s := range nSteps {
		for _, o := range steps[s] {
			p, err := i.plan(ctx, o, prev)
			if err != nil {
				return res, fmt.Errorf("%s: read %s: %w", step(s), entryOf(o, false), err)
			}
			planned[s] = append(planned[s], p)
			inv.Entries = append(inv.Entries, p.entry)
		}
	}
	recorded := false
	// The workloads are waited for once everything is applied: a webhook
	// with self-managed certificates becomes ready only once it has put
	// its CA bundle into the webhook configurations, applied after it.
	var waitWorkloads []*unstructured.Unstructured
	for s := range nSteps {
		if len(planned[s]) == 0 {
			continue
		}
		if step(s) > stepNamespaces && !recorded {
			// The inventory goes into the namespace as soon as it
			// exists and before the objects after it, listing all of
			// them and the previous install's, so that an install
			// interrupted halfway can still be removed.
			if err := writeInventory(ctx, i.Client, union(prev, inv)); err != nil {
				return res, err
			}
			recorded = true
		}
		start := time.Now()
		var created, changed int
		var changes []string
		for _, p := range planned[s] {
			c, err := i.apply(ctx, p)
			if err != nil {
				return res, fmt.Errorf("%s: apply %s: %w", step(s), p.entry, err)
			}
			switch c {
			case applyCreated:
				created++
			case applyChanged:
				changed++
				changes = append(changes, p.entry.String())
			default:
				res.Unchanged++
			}
		}
		res.Created += created
		res.Changed += changed
		line := fmt.Sprintf("  ✓ %-26s %3d applied (%d created, %d changed)", step(s), len(planned[s]), created, changed)
		switch {
		case step(s) == stepCRDs:
			// Always: the objects after them may be of their kinds.
			if err := i.waitReady(ctx, steps[s], opts.Timeout); err != nil {
				i.printf("%s\n", line)
				return res, fmt.Errorf("%s: %w", step(s), err)
			}
			line += ", ready"
		case step(s) == stepWorkloads && opts.Wait:
			waitWorkloads = steps[s]
		}
		i.printf("%s in %s\n", line, time.Since(start).Round(100*time.Millisecond))
		for _, c := range changes {
			i.printf("      changed: %s\n", c)
		}
	}
	if len(waitWorkloads) > 0 {
		start := time.Now()
		if err := i.waitReady(ctx, waitWorkloads, opts.Timeout); err != nil {
			return res, fmt.Errorf("%s: %w", stepWorkloads, err)
		}
		i.printf("  ✓ %-26s %3d ready in %s\n", stepWorkloads, len(waitWorkloads), time.Since(start).Round(100*time.Millisecond))
	}
	pruned, err := i.prune(ctx, prev, inv, opts.Timeout)
	res.Pruned = pruned
	if err != nil {
		return res, err
	}
	if err := writeInventory(ctx, i.Client, inv); err != nil {
		return res, err
	}
	return res, nil
}

type applyChange int

const (
	applyUnchanged applyChange = iota
	applyChanged
	applyCreated
)

// planned is an object to apply with what the cluster holds of it now.
type planned struct {
	obj    *unstructured.Unstructured
	entry  Entry
	exists bool
	// content is the object's content before the apply (see content).
	content string
}

// plan reads the object's current state. An object is the install's when
// it is made now or the previous install had made it; one that was there
// before stays its owner's, and uninstall leaves it.
func (i *Installer) plan(ctx context.Context, o *unstructured.Unstructured, prev *Inventory) (planned, error) {
	o = o.DeepCopy()
	labels := o.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelManagedBy] = ManagedBy
	o.SetLabels(labels)
	cur := o.DeepCopy()
	err := i.Client.Get(ctx, client.ObjectKeyFromObject(o), cur)
	if err != nil && !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
		return planned{}, err
	}
	p := planned{obj: o, exists: err == nil, entry: entryOf(o, err != nil)}
	if p.exists {
		p.content = content(cur)
	}
	if e, ok := prev.find(p.entry); ok && e.Created {
		p.entry.Created = true
	}
	return p, nil
}

// apply server-side applies one planned object and says whether it made,
// changed or left it.
func (i *Installer) apply(ctx context.Context, p planned) (applyChange, error) {
	o := p.obj.DeepCopy()
	if err := i.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return 0, err
	}
	switch {
	case !p.exists:
		return applyCreated, nil
	case content(o) != p.content:
		return applyChanged, nil
	}
	return applyUnchanged, nil
}

// content is what an apply can change in o: its labels, annotations and
// everything but metadata and status, as JSON (keys sorted). The
// resourceVersion would not do: controllers write status (a Deployment's, a
// policy's type checking) and the server rewrites managed fields on its own.
func content(o *unstructured.Unstructured) string {
	c := map[string]any{}
	for k, v := range o.Object {
		if k != "metadata" && k != "status" {
			c[k] = v
		}
	}
	c["labels"] = o.GetLabels()
	c["annotations"] = o.GetAnnotations()
	raw, err := json.Marshal(c)
	if err != nil {
		return err.Error()
	}
	return string(raw)
}

// waitReady polls objs until kstatus says each is Current. On timeout the
// error names each object not ready with what it was last seen waiting for:
// its kstatus status and message, its conditions, and for a workload its
// pods that are not ready and why. A read that fails (the API server busy,
// the client's rate limit near the deadline) keeps what was last seen.
func (i *Installer) waitReady(ctx context.Context, objs []*unstructured.Unstructured, timeout time.Duration) error {
	last := map[string]string{}
	var pending []string
	err := wait.PollUntilContextTimeout(ctx, i.poll(), timeout, true, func(ctx context.Context) (bool, error) {
		pending = pending[:0]
		for _, o := range objs {
			name := entryOf(o, false).String()
			cur := o.DeepCopy()
			if err := i.Client.Get(ctx, client.ObjectKeyFromObject(o), cur); err != nil {
				if _, seen := last[name]; !seen || apierrors.IsNotFound(err) {
					last[name] = "not read: " + err.Error()
				}
				pending = append(pending, name)
				continue
			}
			r, err := status.Compute(cur)
			if err != nil {
				return false, fmt.Errorf("status of %s: %w", name, err)
			}
			if r.Status != status.CurrentStatus {
				last[name] = i.notReady(ctx, cur, r)
				pending = append(pending, name)
			}
		}
		return len(pending) == 0, nil
	})
	if err != nil && len(pending) > 0 {
		var msg strings.Builder
		for _, name := range pending {
			fmt.Fprintf(&msg, "; %s: %s", name, last[name])
		}
		return fmt.Errorf("not ready after %s%s", timeout, msg.String())
	}
	return err
}

// notReady says what o, not Current, waits for: its kstatus status and
// message, its conditions (type=status, reason), and for a workload its
// pods that are not ready with the reason (a failing readiness probe shows
// as ContainersNotReady; a crash as the container's waiting reason).
func (i *Installer) notReady(ctx context.Context, o *unstructured.Unstructured, r *status.Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s", r.Status)
	if r.Message != "" {
		fmt.Fprintf(&b, " (%s)", r.Message)
	}
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	var cs []string
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		s := fmt.Sprintf("%v=%v", m["type"], m["status"])
		if reason, _ := m["reason"].(string); reason != "" {
			s += " " + reason
		}
		cs = append(cs, s)
	}
	if len(cs) > 0 {
		fmt.Fprintf(&b, ", conditions %s", strings.Join(cs, ", "))
	}
	if pods := i.podsNotReady(ctx, o); len(pods) > 0 {
		fmt.Fprintf(&b, ", pods not ready: %s", strings.Join(pods, "; "))
	}
	return b.String()
}

// podsNotReady lists the pods of a workload (its spec.selector.matchLabels)
// whose Ready condition is not True, with the condition's reason and
// message and the waiting reasons of their containers; nothing for other
// kinds or when the pods cannot be read.
func (i *Installer) podsNotReady(ctx context.Context, o *unstructured.Unstructured) []string {
	switch o.GroupVersionKind().GroupKind() {
	case schema.GroupKind{Group: "apps", Kind: "Deployment"}, schema.GroupKind{Group: "apps", Kind: "DaemonSet"}, schema.GroupKind{Group: "apps", Kind: "StatefulSet"}:
	default:
		return nil
	}
	sel, found, _ := unstructured.NestedStringMap(o.Object, "spec", "selector", "matchLabels")
	if !found || len(sel) == 0 {
		return nil
	}
	var pods corev1.PodList
	if err := i.Client.List(ctx, &pods, client.InNamespace(o.GetNamespace()), client.MatchingLabels(sel)); err != nil {
		return nil
	}
	var out []string
	for _, p := range pods.Items {
		ready := corev1.ConditionUnknown
		var why string
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				ready = c.Status
				why = strings.TrimSpace(c.Reason + " " + c.Message)
			}
		}
		if ready == corev1.ConditionTrue {
			continue
		}
		s := fmt.Sprintf("%s %s, Ready=%s", p.Name, p.Status.Phase, ready)
		if why != "" {
			s += " " + why
		}
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil {
				s += fmt.Sprintf(", container %s waiting: %s", cs.Name, strings.TrimSpace(w.Reason+" "+w.Message))
			}
		}
		out = append(out, s)
	}
	return out
}

// prune deletes what the previous install created and this one does not
// apply any more, and waits for it to be gone.
func (i *Installer) prune(ctx context.Context, prev, cur *Inventory, timeout time.Duration) (int, error) {
	if prev == nil {
		return 0, nil
	}
	var gone []Entry
	for _, e := range prev.Entries {
		if _, ok := cur.find(e); !ok && e.Created {
			gone = append(gone, e)
		}
	}
	if len(gone) == 0 {
		return 0, nil
	}
	start := time.Now()
	if err := i.deleteAll(ctx, deletionOrder(gone), timeout); err != nil {
		return 0, fmt.Errorf("prune: %w", err)
	}
	i.printf("  ✓ %-26s %3d deleted (no longer part of the install) in %s\n", "pruned", len(gone), time.Since(start).Round(100*time.Millisecond))
	return len(gone), nil
}

// union is cur plus what prev lists and cur does not.
func union(prev, cur *Inventory) *Inventory {
	out := &Inventory{Namespace: cur.Namespace, Version: cur.Version, Entries: append([]Entry(nil), cur.Entries...)}
	if prev != nil {
		for _, e := range prev.Entries {
			if _, ok := cur.find(e); !ok {
				out.Entries = append(out.Entries, e)
			}
		}
	}
	return out
}

// deleteAll deletes entries in order and waits until every one is gone.
func (i *Installer) deleteAll(ctx context.Context, entries []Entry, timeout time.Duration) error {
	return i.deleteAllPropagating(ctx, entries, timeout, metav1.DeletePropagationBackground)
}

// deleteAllPropagating is deleteAll with a propagation policy: Foreground
// keeps an object until its dependents (a Deployment's pods) are gone.
func (i *Installer) deleteAllPropagating(ctx context.Context, entries []Entry, timeout time.Duration, propagation metav1.DeletionPropagation) error {
	for _, e := range entries {
		err := i.Client.Delete(ctx, e.object(), client.PropagationPolicy(propagation))
		if err != nil && !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
			return fmt.Errorf("delete %s: %w", e, err)
		}
	}
	var left []Entry
	var readErr error
	err := wait.PollUntilContextTimeout(ctx, i.poll(), timeout, true, func(ctx context.Context) (bool, error) {
		left = left[:0]
		for _, e := range entries {
			err := i.Client.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: e.Name}, e.object())
			switch {
			case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
			default:
				// A failed read (the API server busy, the client's
				// rate limit near the deadline) is asked again.
				if err != nil {
					readErr = fmt.Errorf("read %s: %w", e, err)
				}
				left = append(left, e)
			}
		}
		return len(left) == 0, nil
	})
	if err != nil && len(left) > 0 {
		return fmt.Errorf("still there after %s: %v (last read error: %v)", timeout, left, readErr)
	}
	return err
}

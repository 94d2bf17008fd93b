package demo

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SchedulerName is the profile of manifests/scheduler/config.yaml that the
// demo's ferry-scheduler runs.
const SchedulerName = "ferry-scheduler"

// SchedulerNamespace is offloaded with strategy Remote and --scheduler-name
// SchedulerName: ferry's webhook hands its pods to ferry-scheduler.
const SchedulerNamespace = "demo-scheduler"

// Reasons of the scheduler's events about a pod.
const (
	reasonScheduled        = "Scheduled"
	reasonFailedScheduling = "FailedScheduling"
)

// scheduledApp is what the demo deploys in SchedulerNamespace: batch fits
// one of the provider's real nodes; render asks for more CPU than any of
// them has (16) though the virtual node, the provider's sum, has more.
// The default scheduler would bind render to the virtual node, where it
// would never run; ferry-scheduler's RemoteFit keeps it Pending and says
// why.
func scheduledApp() []*appsv1.Deployment {
	return []*appsv1.Deployment{
		plainDeployment(SchedulerNamespace, "batch", scheduledReplicas, "500m"),
		plainDeployment(SchedulerNamespace, "render", 1, "20"),
	}
}

// scheduledReplicas is the size of the Deployment that fits.
const scheduledReplicas = 2

// showScheduling deploys scheduledApp and prints, for each of its pods,
// where it went and the scheduler's own word on it: the reporting
// controller and message of its Scheduled or FailedScheduling event.
func showScheduling(ctx context.Context, out io.Writer, c *clients) error {
	fmt.Fprintf(out, "\n==> deploying in %s: batch (%d pods, 500m CPU each) and render (1 pod, 20 CPU: more than any provider node has);\n"+
		"    ferry's webhook gives them schedulerName %s\n", SchedulerNamespace, scheduledReplicas, SchedulerName)
	for _, d := range scheduledApp() {
		if err := c.ctrl.Create(ctx, d); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create Deployment %s/%s: %w", d.Namespace, d.Name, err)
		}
	}
	if _, err := waitRunning(ctx, c, SchedulerNamespace, scheduledReplicas); err != nil {
		return err
	}
	decided, err := waitSchedulerDecisions(ctx, c, SchedulerNamespace, scheduledReplicas+1)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\n==> pods of namespace %s and what their scheduler said\n", SchedulerNamespace)
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "    POD\tSTATUS\tSCHEDULER\tNODE\tREPORTED BY\tEVENT")
	for _, d := range decided {
		node := d.pod.Spec.NodeName
		if node == "" {
			node = "<none>"
		}
		fmt.Fprintf(w, "    %s\t%s\t%s\t%s\t%s\t%s: %s\n", d.pod.Name, d.pod.Status.Phase, d.pod.Spec.SchedulerName, node,
			d.event.ReportingController, d.event.Reason, oneLine(d.event.Message))
	}
	return w.Flush()
}

// decision is a pod and the latest scheduler event about it.
type decision struct {
	pod   corev1.Pod
	event corev1.Event
}

// waitSchedulerDecisions waits until want pods of namespace have a
// scheduler's event: Scheduled for a bound pod, FailedScheduling for a
// pending one. It returns them sorted by pod name.
func waitSchedulerDecisions(ctx context.Context, c *clients, namespace string, want int) ([]decision, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		decided, err := schedulerDecisions(ctx, c, namespace)
		if err != nil {
			return nil, err
		}
		if len(decided) >= want {
			return decided, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("only %d of %d pods of namespace %s have a scheduler's decision after 2m (is ferry-scheduler running? see its log)", len(decided), want, namespace)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func schedulerDecisions(ctx context.Context, c *clients, namespace string) ([]decision, error) {
	var pods corev1.PodList
	if err := c.ctrl.List(ctx, &pods, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("list pods of %s: %w", namespace, err)
	}
	var events corev1.EventList
	if err := c.ctrl.List(ctx, &events, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("list events of %s: %w", namespace, err)
	}
	// The latest event of each reason per pod. A pod's reason is looked up
	// by its state: a bound pod's decision is its Scheduled event, even
	// when later FailedScheduling events came back from the provider (the
	// provider's scheduler's, reflected on the pod while it is pending
	// there); a pending pod's is its latest FailedScheduling.
	type key struct{ uid, reason string }
	latest := map[key]corev1.Event{}
	for _, e := range events.Items {
		if (e.Reason != reasonScheduled && e.Reason != reasonFailedScheduling) || e.InvolvedObject.Kind != "Pod" {
			continue
		}
		k := key{uid: string(e.InvolvedObject.UID), reason: e.Reason}
		if prev, ok := latest[k]; !ok || eventTime(e).After(eventTime(prev)) {
			latest[k] = e
		}
	}
	var out []decision
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		reason := reasonFailedScheduling
		if p.Spec.NodeName != "" {
			reason = reasonScheduled
		}
		if e, ok := latest[key{uid: string(p.UID), reason: reason}]; ok {
			out = append(out, decision{pod: p, event: e})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pod.Name < out[j].pod.Name })
	return out, nil
}

// eventTime is when an event last happened, whichever API wrote it.
func eventTime(e corev1.Event) time.Time {
	if e.Series != nil && !e.Series.LastObservedTime.IsZero() {
		return e.Series.LastObservedTime.Time
	}
	for _, t := range []time.Time{e.LastTimestamp.Time, e.EventTime.Time, e.CreationTimestamp.Time} {
		if !t.IsZero() {
			return t
		}
	}
	return time.Time{}
}

// oneLine folds a multi-line message into one.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

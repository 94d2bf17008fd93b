package scheduler

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	perf "k8s.io/kubernetes/test/integration/scheduler_perf"
	"k8s.io/kubernetes/test/utils/ktesting"
	"sigs.k8s.io/yaml"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/plugins/clusterselector"
	"github.com/ferry-io/ferry/plugins/registry"
)

// crdFile is the NamespaceOffloading CRD, relative to this folder.
const crdFile = "../../../manifests/crds/ferry.io_namespaceoffloadings.yaml"

// setupTimeout bounds each wait of prepareWorkload.
const setupTimeout = time.Minute

// clusterSelectors are the ClusterSelector plugins of the running
// workload's scheduler, so that prepareWorkload can wait for their
// NamespaceOffloading informers.
var clusterSelectors struct {
	sync.Mutex
	plugins []fwk.PreFilterPlugin
}

// pluginRegistry is ferry's registry, its ClusterSelector factory wrapped to
// record the plugins it builds.
func pluginRegistry() frameworkruntime.Registry {
	r := registry.Registry()
	newClusterSelector := r[clusterselector.Name]
	r[clusterselector.Name] = func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		p, err := newClusterSelector(ctx, obj, h)
		if err != nil {
			return nil, err
		}
		pf, ok := p.(fwk.PreFilterPlugin)
		if !ok {
			return nil, fmt.Errorf("%s is no PreFilter plugin", clusterselector.Name)
		}
		clusterSelectors.Lock()
		defer clusterSelectors.Unlock()
		clusterSelectors.plugins = append(clusterSelectors.plugins, pf)
		return p, nil
	}
	return r
}

// resetPlugins forgets the previous workload's plugins before the next
// workload's scheduler is built (perf.WithPreRunFn).
func resetPlugins(ktesting.TContext, *perf.Workload) (func(), error) {
	clusterSelectors.Lock()
	defer clusterSelectors.Unlock()
	clusterSelectors.plugins = nil
	return nil, nil
}

// prepareWorkload runs once the workload's API server and scheduler are up,
// before its first op (perf.WithPrepareFn): it installs the
// NamespaceOffloading CRD, waits until the ClusterSelector plugins (with
// the ferry profile) have listed NamespaceOffloadings, since until then
// their PreFilter fails every pod, and registers the placement check that
// runs after the workload.
func prepareWorkload(tCtx ktesting.TContext) error {
	if err := installCRD(tCtx); err != nil {
		return err
	}
	if err := waitForClusterSelectors(tCtx); err != nil {
		return err
	}
	tCtx.CleanupCtx(func(tCtx ktesting.TContext) {
		if tCtx.Failed() {
			return // a failed workload leaves pods unscheduled
		}
		if err := verifyPlacement(tCtx); err != nil {
			tCtx.Error(err)
		}
	})
	return nil
}

// installCRD creates the NamespaceOffloading CRD and waits until it is
// established and served through discovery (createAny resolves types by
// discovery).
func installCRD(tCtx ktesting.TContext) error {
	data, err := os.ReadFile(crdFile)
	if err != nil {
		return err
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &crd); err != nil {
		return fmt.Errorf("%s: %w", crdFile, err)
	}
	crds := tCtx.APIExtensions().ApiextensionsV1().CustomResourceDefinitions()
	if _, err := crds.Create(tCtx, &crd, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create CRD %s: %w", crd.Name, err)
	}
	gv := schema.GroupVersion{Group: crd.Spec.Group, Version: crd.Spec.Versions[0].Name}.String()
	return wait.PollUntilContextTimeout(tCtx, 100*time.Millisecond, setupTimeout, true, func(ctx context.Context) (bool, error) {
		got, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		established := slices.ContainsFunc(got.Status.Conditions, func(c apiextensionsv1.CustomResourceDefinitionCondition) bool {
			return c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
		})
		if !established {
			return false, nil
		}
		list, err := tCtx.Client().Discovery().ServerResourcesForGroupVersion(gv)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == crd.Spec.Names.Plural }), nil
	})
}

// waitForClusterSelectors waits until every ClusterSelector plugin of the
// scheduler has synced: its PreFilter stops failing a probe pod of a
// namespace that is not offloaded.
func waitForClusterSelectors(tCtx ktesting.TContext) error {
	clusterSelectors.Lock()
	plugins := slices.Clone(clusterSelectors.plugins)
	clusterSelectors.Unlock()
	probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ferry-perf-probe", Name: "probe"}}
	start := time.Now()
	for _, pl := range plugins {
		var last *fwk.Status
		err := wait.PollUntilContextTimeout(tCtx, 50*time.Millisecond, setupTimeout, true, func(ctx context.Context) (bool, error) {
			_, last = pl.PreFilter(ctx, framework.NewCycleState(), probe, nil)
			return last.Code() != fwk.Error, nil
		})
		if err != nil {
			return fmt.Errorf("%s never synced (last PreFilter status %v): %w", clusterselector.Name, last, err)
		}
	}
	if len(plugins) > 0 {
		tCtx.Logf("%s synced %s after the CRD was established", clusterselector.Name, time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// namespaceOffloadings is the resource of the CRD.
var namespaceOffloadings = ferryv1alpha1.GroupVersion.WithResource("namespaceoffloadings")

// maxReported bounds the misplaced pods one check reports.
const maxReported = 10

// verifyPlacement checks, after a workload, that every pod is scheduled and
// sits where ferry's rules allow, judged from the API objects alone:
//   - a virtual node only for a pod tolerating the virtual-node taint, and
//     only a node the pod's required node affinity matches;
//   - a namespace without NamespaceOffloading keeps its pods on real nodes;
//     podOffloadingStrategy Remote puts them on virtual nodes, Local on real
//     ones; a virtual node must match the namespace's clusterSelector;
//   - a pod whose bound volume is labelled ferry.io/cluster-id=X runs on a
//     virtual node of X (on a real node when unlabelled).
//
// The rules hold for FerryPlacement (enforced by ferry's plugins) and for
// NodeAffinityPlacement (enforced by its pods' node affinity) alike, which
// also checks that the two workloads place pods the same way. It logs where
// the pods of each namespace went.
func verifyPlacement(tCtx ktesting.TContext) error {
	nodes, err := tCtx.Client().CoreV1().Nodes().List(tCtx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	pods, err := tCtx.Client().CoreV1().Pods(metav1.NamespaceAll).List(tCtx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	pvcs, err := tCtx.Client().CoreV1().PersistentVolumeClaims(metav1.NamespaceAll).List(tCtx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	pvs, err := tCtx.Client().CoreV1().PersistentVolumes().List(tCtx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	nsos, err := tCtx.Dynamic().Resource(namespaceOffloadings).Namespace(metav1.NamespaceAll).List(tCtx, metav1.ListOptions{})
	if err != nil {
		return err
	}

	nodeByName := map[string]*corev1.Node{}
	for i := range nodes.Items {
		nodeByName[nodes.Items[i].Name] = &nodes.Items[i]
	}
	pvByName := map[string]*corev1.PersistentVolume{}
	for i := range pvs.Items {
		pvByName[pvs.Items[i].Name] = &pvs.Items[i]
	}
	volumeOfClaim := map[string]string{} // namespace/claim -> volume name
	for _, pvc := range pvcs.Items {
		volumeOfClaim[pvc.Namespace+"/"+pvc.Name] = pvc.Spec.VolumeName
	}
	policies := map[string]*ferryv1alpha1.NamespaceOffloading{}
	for _, u := range nsos.Items {
		var nso ferryv1alpha1.NamespaceOffloading
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &nso); err != nil {
			return fmt.Errorf("NamespaceOffloading %s/%s: %w", u.GetNamespace(), u.GetName(), err)
		}
		policies[nso.Namespace] = &nso
	}

	var problems []string
	misplaced := 0
	report := func(pod *corev1.Pod, format string, args ...any) {
		misplaced++
		if len(problems) < maxReported {
			problems = append(problems, fmt.Sprintf("pod %s/%s on %q: ", pod.Namespace, pod.Name, pod.Spec.NodeName)+fmt.Sprintf(format, args...))
		}
	}
	where := map[string]map[string]int{} // namespace -> cluster (or "local") -> pods
	for i := range pods.Items {
		pod := &pods.Items[i]
		node := nodeByName[pod.Spec.NodeName]
		if node == nil {
			report(pod, "not scheduled, or on an unknown node")
			continue
		}
		virtual := node.Labels[ferryv1alpha1.LabelNodeType] == ferryv1alpha1.NodeTypeVirtual
		cluster := "local"
		if virtual {
			cluster = node.Labels[ferryv1alpha1.LabelClusterID]
		}
		if where[pod.Namespace] == nil {
			where[pod.Namespace] = map[string]int{}
		}
		where[pod.Namespace][cluster]++

		if virtual && !placement.ToleratesVirtualNodes(pod.Spec.Tolerations) {
			report(pod, "a virtual node, but the pod does not tolerate %s", ferryv1alpha1.TaintVirtualNode)
		}
		if ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); err != nil || !ok {
			report(pod, "the node does not match the pod's required node affinity (%v)", err)
		}
		if msg := policyViolation(policies[pod.Namespace], node, virtual); msg != "" {
			report(pod, "%s", msg)
		}
		for _, v := range pod.Spec.Volumes {
			if v.PersistentVolumeClaim == nil {
				continue
			}
			pv := pvByName[volumeOfClaim[pod.Namespace+"/"+v.PersistentVolumeClaim.ClaimName]]
			if pv == nil {
				continue
			}
			want := pv.Labels[ferryv1alpha1.LabelClusterID]
			if got := node.Labels[ferryv1alpha1.LabelClusterID]; (want == "" && virtual) || (want != "" && (!virtual || got != want)) {
				report(pod, "its volume %s lives in %q, the node is in %q", pv.Name, want, cluster)
			}
		}
	}

	// LocalFirst under ferry-scheduler: a pod on a virtual node means no
	// real node had room for it. At the end, with the real nodes of the
	// LocalFirst workloads bound by their pod count, no real node may have
	// room left while a LocalFirst pod runs on a virtual node. (Under the
	// default scheduler the webhook's preferred term is only a preference:
	// NodeAffinityLocalFirst is reported, not checked.)
	if strings.Contains(tCtx.Name(), "/"+CaseLocalFirst+"/") {
		onNode := map[string]int64{}
		for _, pod := range pods.Items {
			onNode[pod.Spec.NodeName]++
		}
		for ns, nso := range policies {
			if nso.Spec.PlacementPreference != ferryv1alpha1.PlacementPreferenceLocalFirst || where[ns] == nil || where[ns]["local"] == sumCounts(where[ns]) {
				continue
			}
			for _, n := range nodes.Items {
				if n.Labels[ferryv1alpha1.LabelNodeType] != ferryv1alpha1.NodeTypeVirtual && onNode[n.Name] < n.Status.Capacity.Pods().Value() {
					misplaced++
					problems = append(problems, fmt.Sprintf("namespace %s is LocalFirst: %d of its pods on virtual nodes while real node %s holds %d pods of %d",
						ns, sumCounts(where[ns])-where[ns]["local"], n.Name, onNode[n.Name], n.Status.Capacity.Pods().Value()))
					break
				}
			}
		}
	}
	if misplaced > 0 {
		return fmt.Errorf("%d of %d pods misplaced, first:\n%s", misplaced, len(pods.Items), strings.Join(problems, "\n"))
	}
	var spread []string
	for _, ns := range slices.Sorted(maps.Keys(where)) {
		var parts []string
		for _, c := range slices.Sorted(maps.Keys(where[ns])) {
			parts = append(parts, fmt.Sprintf("%s=%d", c, where[ns][c]))
		}
		spread = append(spread, ns+": "+strings.Join(parts, " "))
	}
	placements.Lock()
	defer placements.Unlock()
	placements.lines = append(placements.lines, fmt.Sprintf("placement %s: all %d pods where ferry's rules allow; %s",
		strings.TrimPrefix(tCtx.Name(), "BenchmarkPerfScheduling/"), len(pods.Items), strings.Join(spread, "; ")))
	return nil
}

func sumCounts(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// placements are verifyPlacement's summaries, printed with the RESULT
// lines: go test keeps only 10 lines of a benchmark's log, and a line
// printed during a benchmark lands amid go test's own.
var placements struct {
	sync.Mutex
	lines []string
}

// takePlacements returns and forgets the summaries.
func takePlacements() []string {
	placements.Lock()
	defer placements.Unlock()
	lines := placements.lines
	placements.lines = nil
	return lines
}

// policyViolation says why a node breaks the namespace's NamespaceOffloading
// (nil: the namespace is not offloaded), "" when it does not.
func policyViolation(nso *ferryv1alpha1.NamespaceOffloading, node *corev1.Node, virtual bool) string {
	if nso == nil {
		if virtual {
			return "a virtual node, but the namespace is not offloaded"
		}
		return ""
	}
	strategy := nso.Spec.PodOffloadingStrategy
	switch {
	case strategy == ferryv1alpha1.PodOffloadingRemote && !virtual:
		return "a real node, but podOffloadingStrategy is Remote"
	case strategy == ferryv1alpha1.PodOffloadingLocal && virtual:
		return "a virtual node, but podOffloadingStrategy is Local"
	case !virtual:
		return ""
	}
	sel, err := placement.NewClusterSelector(nso.Spec.ClusterSelector)
	if err != nil {
		return "the namespace's clusterSelector is invalid: " + err.Error()
	}
	if !sel.Matches(node) {
		return "a virtual node the namespace's clusterSelector does not select"
	}
	return ""
}

package webhooks

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// AnnotationAppliedPolicy records, on a pod, what the pod webhook did:
// the strategy it placed the pod by and the changes it made.
const AnnotationAppliedPolicy = "ferry.io/applied-offloading-policy"

// virtualNodeToleration lets a pod onto ferry's virtual nodes.
var virtualNodeToleration = corev1.Toleration{
	Key: ferryv1alpha1.TaintVirtualNode, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute,
}

// PodMutator applies a namespace's offloading policy to its new pods: the
// virtual-node toleration when they may run remotely, and required node
// affinity restricting them to the nodes the policy allows, merged with
// their own. It refuses pods whose ferry.io annotations do not validate.
type PodMutator struct {
	// Reader reads NamespaceOffloadings.
	Reader client.Reader
}

// placedFields are the parts of a pod the webhook reads and changes.
// Decoding only them, rather than the whole pod (containers, volumes...),
// spares the webhook most of its decoding per request.
type placedFields struct {
	Metadata struct {
		Annotations map[string]string `json:"annotations,omitempty"`
	} `json:"metadata"`
	Spec struct {
		Tolerations      []corev1.Toleration `json:"tolerations,omitempty"`
		Affinity         *corev1.Affinity    `json:"affinity,omitempty"`
		SchedulerName    string              `json:"schedulerName,omitempty"`
		RuntimeClassName *string             `json:"runtimeClassName,omitempty"`
	} `json:"spec"`
}

// decodePlaced decodes the fields of the request's pod that placement reads
// into a pod that holds only them.
func decodePlaced(req admission.Request) (*corev1.Pod, error) {
	if req.Kind.Kind != "" && (req.Kind.Group != "" || req.Kind.Kind != "Pod") {
		return nil, fmt.Errorf("decode pod: the request is for a %s", req.Kind)
	}
	var f placedFields
	if err := utiljson.Unmarshal(req.Object.Raw, &f); err != nil {
		return nil, fmt.Errorf("decode pod: %w", err)
	}
	pod := &corev1.Pod{}
	pod.Annotations = f.Metadata.Annotations
	pod.Spec.Tolerations, pod.Spec.Affinity, pod.Spec.SchedulerName = f.Spec.Tolerations, f.Spec.Affinity, f.Spec.SchedulerName
	pod.Spec.RuntimeClassName = f.Spec.RuntimeClassName
	return pod, nil
}

// Handle implements admission.Handler.
func (m *PodMutator) Handle(ctx context.Context, req admission.Request) admission.Response {
	pod, err := decodePlaced(req)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	var nso ferryv1alpha1.NamespaceOffloading
	key := types.NamespacedName{Namespace: req.Namespace, Name: ferryv1alpha1.NamespaceOffloadingName}
	err = m.Reader.Get(ctx, key, &nso)
	if err != nil && !apierrors.IsNotFound(err) {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("read NamespaceOffloading %s: %w", key, err))
	}
	offloaded := err == nil && nso.DeletionTimestamp == nil
	if !offloaded {
		if placement.UsesVirtualRuntimeClass(pod.Spec.RuntimeClassName) {
			return admission.Denied(placement.RuntimeClassNotOffloaded(req.Namespace).Error())
		}
		nso.Spec.PodOffloadingStrategy = ferryv1alpha1.PodOffloadingLocal // a pod may only stay local
	}
	// The pod's ferry.io annotations are validated here, on creation, rather
	// than by a second (validating) call: one webhook call per pod instead
	// of two. The validating webhook checks updates. A pod of ferry's
	// RuntimeClass is validated against the Remote strategy it opted into.
	validateAgainst := nso.Spec.PodOffloadingStrategy
	if placement.UsesVirtualRuntimeClass(pod.Spec.RuntimeClassName) {
		if _, ferr := placement.PodStrategyWithRuntimeClass(validateAgainst, pod.Annotations, pod.Spec.RuntimeClassName); ferr != nil {
			return admission.Denied(ferr.Error())
		}
		validateAgainst = ferryv1alpha1.PodOffloadingRemote
	}
	if errs := ValidateAnnotations("Pod", pod.Annotations, validateAgainst, ferryOwnedAnnotations["Pod"]...); len(errs) > 0 {
		return admission.Denied(errs.ToAggregate().Error())
	}
	if !offloaded {
		return admission.Allowed("namespace not offloaded")
	}
	strategy, ferr := placement.PodStrategyWithRuntimeClass(nso.Spec.PodOffloadingStrategy, pod.Annotations, pod.Spec.RuntimeClassName)
	if ferr != nil {
		return admission.Denied(ferr.Error())
	}
	mutated := pod.DeepCopy()
	Apply(mutated, Policy{Strategy: strategy, ClusterSelector: nso.Spec.ClusterSelector, SchedulerName: nso.Spec.SchedulerName,
		Preference: placement.Preference(strategy, nso.Spec.PlacementPreference)})
	return admission.Patched("", patchOps(pod, mutated)...).WithWarnings(sameStrategyWarnings(req.Namespace, nso.Spec.PodOffloadingStrategy, pod.Annotations)...)
}

// sameStrategyWarnings warns about a pod's ferry.io/pod-offloading-strategy
// that asks for its namespace's own strategy: it narrows nothing, so it
// changes nothing (and would not follow a later change of the namespace's).
func sameStrategyWarnings(namespace string, nsStrategy ferryv1alpha1.PodOffloadingStrategy, annotations map[string]string) []string {
	if nsStrategy == "" {
		nsStrategy = ferryv1alpha1.PodOffloadingLocalAndRemote // the API's default
	}
	asked, ok := annotations[placement.AnnotationPodOffloadingStrategy]
	if !ok || ferryv1alpha1.PodOffloadingStrategy(asked) != nsStrategy {
		return nil
	}
	return []string{fmt.Sprintf("%s: %q has no effect: it is namespace %s's podOffloadingStrategy already; a pod's annotation can only narrow it (LocalAndRemote to Local or Remote)",
		field.NewPath("metadata", "annotations").Key(placement.AnnotationPodOffloadingStrategy), asked, namespace)}
}

// patchOps are the JSON patch operations turning pod into mutated, for the
// fields Apply changes. Writing them directly, rather than diffing the two
// pods' JSON, spares the webhook two full parses of the pod per request.
func patchOps(pod, mutated *corev1.Pod) []jsonpatch.JsonPatchOperation {
	var ops []jsonpatch.JsonPatchOperation
	add := func(path string, value any) {
		ops = append(ops, jsonpatch.JsonPatchOperation{Operation: "add", Path: path, Value: value})
	}
	if len(mutated.Spec.Tolerations) != len(pod.Spec.Tolerations) {
		add("/spec/tolerations", mutated.Spec.Tolerations)
	}
	if mutated.Spec.SchedulerName != pod.Spec.SchedulerName {
		add("/spec/schedulerName", mutated.Spec.SchedulerName)
	}
	if !equality.Semantic.DeepEqual(mutated.Spec.Affinity, pod.Spec.Affinity) {
		add("/spec/affinity", mutated.Spec.Affinity)
	}
	if pod.Annotations == nil {
		add("/metadata/annotations", mutated.Annotations)
	} else if mutated.Annotations[AnnotationAppliedPolicy] != pod.Annotations[AnnotationAppliedPolicy] {
		// RFC 6901: "~" and "/" in a key are escaped.
		key := strings.NewReplacer("~", "~0", "/", "~1").Replace(AnnotationAppliedPolicy)
		add("/metadata/annotations/"+key, mutated.Annotations[AnnotationAppliedPolicy])
	}
	return ops
}

// Policy is what a pod is placed by: its strategy (the namespace's, or the
// narrower one the pod asks for), the namespace's cluster selector and
// scheduler.
type Policy struct {
	Strategy        ferryv1alpha1.PodOffloadingStrategy
	ClusterSelector *corev1.NodeSelector
	// SchedulerName is given to pods that may run remotely and ask for no
	// scheduler of their own; empty leaves schedulerName alone.
	SchedulerName string
	// Preference, LocalFirst or RemoteFirst, gives a pod left to the
	// default scheduler a preferred node affinity term toward that side
	// (placement.PreferredNodeTerm); ferry-scheduler's ClusterPreference
	// plugin reads the namespace's preference itself.
	Preference ferryv1alpha1.PlacementPreference
}

// Apply places pod by policy (idempotent: applying it again changes
// nothing) and records what it did in AnnotationAppliedPolicy.
func Apply(pod *corev1.Pod, policy Policy) {
	var did []string
	strategy := policy.Strategy
	if strategy != ferryv1alpha1.PodOffloadingLocal && !placement.ToleratesVirtualNodes(pod.Spec.Tolerations) {
		pod.Spec.Tolerations = append(pod.Spec.Tolerations, virtualNodeToleration)
		did = append(did, "toleration")
	}
	if strategy != ferryv1alpha1.PodOffloadingLocal && policy.SchedulerName != "" && pod.Spec.SchedulerName != policy.SchedulerName &&
		(pod.Spec.SchedulerName == "" || pod.Spec.SchedulerName == corev1.DefaultSchedulerName) {
		pod.Spec.SchedulerName = policy.SchedulerName
		did = append(did, "schedulerName")
	}
	if pod.Spec.Affinity == nil {
		pod.Spec.Affinity = &corev1.Affinity{}
	}
	if pod.Spec.Affinity.NodeAffinity == nil {
		pod.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := pod.Spec.Affinity.NodeAffinity
	merged := MergeRequired(na.RequiredDuringSchedulingIgnoredDuringExecution, PolicyTerms(strategy, policy.ClusterSelector))
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil || !equality.Semantic.DeepEqual(merged, na.RequiredDuringSchedulingIgnoredDuringExecution) {
		na.RequiredDuringSchedulingIgnoredDuringExecution = merged
		did = append(did, "nodeAffinity")
	}
	if term := placement.PreferredNodeTerm(policy.Preference); term != nil &&
		(pod.Spec.SchedulerName == "" || pod.Spec.SchedulerName == corev1.DefaultSchedulerName) &&
		!slices.ContainsFunc(na.PreferredDuringSchedulingIgnoredDuringExecution, func(t corev1.PreferredSchedulingTerm) bool { return equality.Semantic.DeepEqual(t, *term) }) {
		na.PreferredDuringSchedulingIgnoredDuringExecution = append(na.PreferredDuringSchedulingIgnoredDuringExecution, *term)
		did = append(did, "preferredNodeAffinity")
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	record := "strategy=" + string(strategy)
	if prev, ok := pod.Annotations[AnnotationAppliedPolicy]; ok && len(did) == 0 {
		record = prev // reinvoked: nothing new done
	} else if len(did) > 0 {
		record += "; added " + strings.Join(did, ", ")
	}
	pod.Annotations[AnnotationAppliedPolicy] = record
}

package reflection

import (
	"maps"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// Kind names a reflected resource, as its flags and metrics do.
type Kind string

// The reflected kinds.
const (
	ConfigMaps             Kind = "configmaps"
	Secrets                Kind = "secrets"
	Services               Kind = "services"
	EndpointSlices         Kind = "endpointslices"
	Ingresses              Kind = "ingresses"
	NetworkPolicies        Kind = "networkpolicies"
	ServiceAccounts        Kind = "serviceaccounts"
	PersistentVolumeClaims Kind = "persistentvolumeclaims"
	Events                 Kind = "events"
)

// AllKinds lists every kind, in the order they start.
var AllKinds = []Kind{ConfigMaps, Secrets, ServiceAccounts, Services, EndpointSlices, Ingresses, NetworkPolicies, PersistentVolumeClaims, Events}

// Env is what translations need beyond the local object.
type Env struct {
	// Consumer is the local cluster's ID, put in the origin labels.
	Consumer ferryv1alpha1.ClusterID
	// NodeName is the virtual node this reflection serves: endpoints of pods
	// running on it are the provider's own and are not reflected back.
	NodeName string
	// ProviderNode says whether a node is one of this cluster's virtual
	// nodes standing for the same provider (one per node pool): the
	// endpoints of pods on it are the provider's own too. Nil: only
	// NodeName is.
	ProviderNode func(name string) bool
	// RemapIP translates a local pod IP into the address the provider
	// reaches it at (the network fabric's), "" when it cannot reach it;
	// identity when nil.
	RemapIP func(ip string) string
	// IngressClasses maps local IngressClass names to the provider's; "*"
	// maps every other class. An unmapped class is dropped, so the
	// provider's default class serves the Ingress.
	IngressClasses map[string]string
	// StorageClasses maps local StorageClass names to the provider's, the
	// same way.
	StorageClasses map[string]string
}

// providerNode says whether pods on node run in the provider.
func (e *Env) providerNode(node string) bool {
	if node == "" {
		return false
	}
	return node == e.NodeName || (e.ProviderNode != nil && e.ProviderNode(node))
}

func (e *Env) remapIP(ip string) string {
	if e.RemapIP == nil {
		return ip
	}
	return e.RemapIP(ip)
}

// mapClass translates a class name through m: an exact entry, else "*",
// else "" (the provider's default).
func mapClass(m map[string]string, class string) string {
	if to, ok := m[class]; ok {
		return to
	}
	return m["*"]
}

// translator turns the local objects of one kind into their remote copies.
type translator interface {
	// desired is the remote copy of local in twinNamespace. skip is a
	// non-empty reason when local is never reflected, whatever the policy
	// says (the root CA ConfigMap, service-account token Secrets: the
	// provider has its own).
	desired(env *Env, local client.Object, twinNamespace string) (want client.Object, skip string, err error)
	// equal tells whether remote already matches want in every field ferry
	// owns; fields the provider assigns (cluster IPs, node ports, bound
	// volumes) are not compared.
	equal(want, remote client.Object) bool
	// merge is remote with want's fields applied, for an update: what the
	// provider assigned is kept.
	merge(want, remote client.Object) client.Object
}

// recreator is implemented by translators of kinds whose copy cannot
// always be fixed by an update (a field the API server keeps as it is).
type recreator interface {
	// mustRecreate tells whether remote can only become want by deleting
	// it and creating it again.
	mustRecreate(want, remote client.Object) bool
}

// remoteMeta is the metadata of the remote copy of local: its name, the twin
// namespace, local's labels and annotations without ferry's own keys and
// kubectl's last-applied configuration, and the origin labels.
func remoteMeta(env *Env, local metav1.Object, twinNamespace string) metav1.ObjectMeta {
	labels := withoutKeys(local.GetLabels())
	if labels == nil {
		labels = make(map[string]string, 2)
	}
	labels[ferryv1alpha1.LabelOriginCluster] = string(env.Consumer)
	labels[ferryv1alpha1.LabelOriginNamespace] = local.GetNamespace()
	return metav1.ObjectMeta{
		Name:        local.GetName(),
		Namespace:   twinNamespace,
		Labels:      labels,
		Annotations: withoutKeys(local.GetAnnotations()),
	}
}

// lastAppliedAnnotation is kubectl's copy of what it applied: meaningless
// (and possibly large) on the provider.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

func withoutKeys(in map[string]string) map[string]string {
	var out map[string]string
	for k, v := range in {
		if strings.HasPrefix(k, ferryv1alpha1.KeyPrefix) || k == lastAppliedAnnotation {
			continue
		}
		if out == nil {
			out = make(map[string]string, len(in))
		}
		out[k] = v
	}
	return out
}

// metaEqual compares the labels and annotations ferry writes; an empty map
// equals a nil one. Remote annotations whose keys start with one of
// providerOwned are the provider's (a PVC's binding annotations) and are
// ignored.
func metaEqual(want, remote metav1.Object, providerOwned ...string) bool {
	return maps.Equal(want.GetLabels(), remote.GetLabels()) &&
		maps.Equal(want.GetAnnotations(), withoutPrefixes(remote.GetAnnotations(), providerOwned))
}

// mergeMeta puts want's labels and annotations on remote, keeping the
// remote annotations whose keys start with one of providerOwned.
func mergeMeta(want, remote metav1.Object, providerOwned ...string) {
	remote.SetLabels(maps.Clone(want.GetLabels()))
	annotations := maps.Clone(want.GetAnnotations())
	for k, v := range remote.GetAnnotations() {
		if hasAnyPrefix(k, providerOwned) {
			if annotations == nil {
				annotations = map[string]string{}
			}
			annotations[k] = v
		}
	}
	remote.SetAnnotations(annotations)
}

func withoutPrefixes(in map[string]string, prefixes []string) map[string]string {
	if len(prefixes) == 0 {
		return in
	}
	var out map[string]string
	for k, v := range in {
		if hasAnyPrefix(k, prefixes) {
			continue
		}
		if out == nil {
			out = make(map[string]string, len(in))
		}
		out[k] = v
	}
	return out
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

package reflection

import (
	"context"
	"fmt"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/virtualkubelet/offloading"
)

// serviceAccountTranslator copies a ServiceAccount's metadata and image pull
// secrets (reflected as Secrets). Its token secrets are the consumer's and
// are not copied; the provider mounts no provider token for it
// (automountServiceAccountToken false): offloaded pods get a consumer token
// from the tokenManager instead. The default service account is the
// provider's own: it is not copied.
type serviceAccountTranslator struct{}

func (serviceAccountTranslator) desired(env *Env, local client.Object, twin string) (client.Object, string, error) {
	sa := local.(*corev1.ServiceAccount)
	if sa.Name == defaultServiceAccount {
		// Offloaded pods run as it on the provider, with the token Secret of
		// the consumer's (the tokenManager keeps it all the same).
		return nil, "the provider makes its own default service account in every namespace", nil
	}
	return &corev1.ServiceAccount{
		ObjectMeta:                   remoteMeta(env, sa, twin),
		ImagePullSecrets:             sa.ImagePullSecrets,
		AutomountServiceAccountToken: new(false),
	}, "", nil
}

func (serviceAccountTranslator) equal(want, remote client.Object) bool {
	w, r := want.(*corev1.ServiceAccount), remote.(*corev1.ServiceAccount)
	return metaEqual(w, r) && pullSecretsEqual(w.ImagePullSecrets, r.ImagePullSecrets) &&
		r.AutomountServiceAccountToken != nil && !*r.AutomountServiceAccountToken
}

func pullSecretsEqual(a, b []corev1.LocalObjectReference) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (serviceAccountTranslator) merge(want, remote client.Object) client.Object {
	w, out := want.(*corev1.ServiceAccount), remote.(*corev1.ServiceAccount).DeepCopy()
	mergeMeta(w, out)
	out.ImagePullSecrets = w.ImagePullSecrets
	out.AutomountServiceAccountToken = w.AutomountServiceAccountToken
	return out
}

// defaultServiceAccount is the service account every namespace gets, on
// the provider too: it is not reflected.
const defaultServiceAccount = "default"

// Keys of a service-account token Secret in a twin namespace.
const (
	// labelServiceAccountToken marks the token Secrets, which the Secret
	// reflector leaves alone.
	labelServiceAccountToken = "ferry.io/service-account-token"
	// annotationServiceAccount names the consumer service account.
	annotationServiceAccount = "ferry.io/service-account"
	// annotationRefreshAt is when the token is renewed (RFC 3339).
	annotationRefreshAt = "ferry.io/token-refresh-at"
	// rootCAKey is the CA bundle's key in rootCAConfigMap.
	rootCAKey = "ca.crt"
	// podsByServiceAccount indexes the node's pods that mount a service
	// account token by namespace/serviceaccount.
	podsByServiceAccount = "serviceaccount"
	// caRetry is how soon a token Secret is tried again while the
	// namespace's root CA ConfigMap is not there yet.
	caRetry = time.Second
)

func isTokenSecret(o client.Object) bool {
	return o.GetLabels()[labelServiceAccountToken] == "true"
}

// tokenManager keeps, for every service account an offloaded pod of the
// node runs as, a Secret in the twin namespace with a token of the consumer
// service account (a TokenRequest on the consumer, renewed at 80% of its
// lifetime), the consumer's CA bundle and the namespace: what the projected
// token volume holds on a consumer node, mounted where the pod expects it.
// A service account no pod of the node uses has no token Secret.
type tokenManager struct {
	local      kubernetes.Interface
	writer     client.Client
	remote     *remoteSet
	env        *Env
	metrics    *metrics
	recorder   record.EventRecorder
	expiration time.Duration
	pods       cache.SharedIndexInformer
	rootCAs    cache.SharedIndexInformer
	sa         *reflector

	written *writeLog
}

// setup wakes the service account reflector r when a pod of the node
// starts or stops using a service account, or a namespace's CA changes.
func (m *tokenManager) setup(r *reflector) error {
	m.sa = r
	if err := m.pods.AddIndexers(cache.Indexers{podsByServiceAccount: func(obj any) ([]string, error) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || !mountsToken(pod) {
			return nil, nil
		}
		return []string{pod.Namespace + "/" + serviceAccountOf(pod)}, nil
	}}); err != nil {
		return fmt.Errorf("index the node's pods by service account: %w", err)
	}
	onPod := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if pod, ok := obj.(*corev1.Pod); ok && mountsToken(pod) {
			r.onLocal(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: serviceAccountOf(pod)}})
		}
	}
	if _, err := m.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onPod, UpdateFunc: func(_, o any) { onPod(o) }, DeleteFunc: onPod,
	}); err != nil {
		return fmt.Errorf("watch the node's pods: %w", err)
	}
	onCA := func(obj any) {
		key, ok := keyOf(obj)
		if !ok || key.Name != rootCAConfigMap {
			return
		}
		for _, k := range m.pods.GetIndexer().ListIndexFuncValues(podsByServiceAccount) {
			if ns, name, found := strings.Cut(k, "/"); found && ns == key.Namespace {
				r.onLocal(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
			}
		}
	}
	if _, err := m.rootCAs.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onCA, UpdateFunc: func(_, o any) { onCA(o) },
	}); err != nil {
		return fmt.Errorf("watch the root CA ConfigMaps: %w", err)
	}
	return nil
}

// mountsToken tells whether pod has the projected token volume the
// consumer's ServiceAccount admission adds.
func mountsToken(pod *corev1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if v.Projected != nil && strings.HasPrefix(v.Name, "kube-api-access-") {
			return true
		}
	}
	return false
}

func serviceAccountOf(pod *corev1.Pod) string {
	if pod.Spec.ServiceAccountName != "" {
		return pod.Spec.ServiceAccountName
	}
	return defaultServiceAccount
}

// onRemote wakes the service account of a token Secret that changed on the
// provider, so drift is repaired.
func (m *tokenManager) onRemote(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	s, ok := obj.(*corev1.Secret)
	if !ok || !isTokenSecret(s) {
		return
	}
	if local := m.sa.ns.local(s.Namespace); local != "" && s.Annotations[annotationServiceAccount] != "" {
		m.sa.enqueue(types.NamespacedName{Namespace: local, Name: s.Annotations[annotationServiceAccount]})
	}
}

// sync runs after the service account key's reflection: it keeps its token
// Secret when a pod of the node uses it, and removes it otherwise. It
// returns when to look again (the token's renewal).
func (m *tokenManager) sync(ctx context.Context, key types.NamespacedName, local client.Object, twin string, reflected bool) (time.Duration, error) {
	name := offloading.ServiceAccountTokenSecret(key.Name)
	remoteKey := types.NamespacedName{Namespace: twin, Name: name}
	current := m.current(remoteKey)
	users, err := m.pods.GetIndexer().ByIndex(podsByServiceAccount, key.String())
	if err != nil {
		return 0, err
	}
	if !reflected || local == nil || len(users) == 0 {
		if current == nil {
			return 0, nil
		}
		uid := current.UID
		err := m.writer.Delete(ctx, current, client.Preconditions{UID: &uid})
		m.metrics.writes.WithLabelValues(string(ServiceAccounts), "delete").Inc()
		if err != nil && !apierrors.IsNotFound(err) {
			return 0, fmt.Errorf("delete token secret %s: %w", remoteKey, err)
		}
		m.written.remember(remoteKey, current, true)
		return 0, nil
	}
	ca := ""
	if obj, ok, _ := m.rootCAs.GetIndexer().GetByKey(key.Namespace + "/" + rootCAConfigMap); ok {
		ca = obj.(*corev1.ConfigMap).Data[rootCAKey]
	}
	if ca == "" {
		return caRetry, nil
	}
	now := time.Now()
	if current != nil && current.Data != nil && string(current.Data[rootCAKey]) == ca &&
		string(current.Data["namespace"]) == key.Namespace && len(current.Data["token"]) > 0 &&
		current.Labels[ferryv1alpha1.LabelOriginCluster] == string(m.env.Consumer) {
		if at, err := time.Parse(time.RFC3339, current.Annotations[annotationRefreshAt]); err == nil && at.After(now) {
			return at.Sub(now), nil
		}
	}
	seconds := int64(m.expiration / time.Second)
	tr, err := m.local.CoreV1().ServiceAccounts(key.Namespace).CreateToken(ctx, key.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds},
	}, metav1.CreateOptions{})
	if err != nil {
		if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
			m.recorder.Eventf(local, corev1.EventTypeWarning, ReasonReflectionFailed, "cannot request a token for offloaded pods: %v", err)
		}
		return 0, fmt.Errorf("request a token of service account %s: %w", key, err)
	}
	issued := now
	lifetime := tr.Status.ExpirationTimestamp.Sub(issued)
	refreshAt := issued.Add(lifetime * 8 / 10).UTC().Truncate(time.Second)
	want := &corev1.Secret{
		ObjectMeta: remoteMeta(m.env, &metav1.ObjectMeta{Namespace: key.Namespace, Name: name}, twin),
		Type:       corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			"token":   []byte(tr.Status.Token),
			rootCAKey: []byte(ca),
			// In-cluster clients read their namespace here: the consumer's.
			"namespace": []byte(key.Namespace),
		},
	}
	want.Labels[labelServiceAccountToken] = "true"
	want.Annotations = map[string]string{annotationServiceAccount: key.Name, annotationRefreshAt: refreshAt.Format(time.RFC3339)}
	if current == nil {
		err = m.writer.Create(ctx, want)
		m.metrics.writes.WithLabelValues(string(ServiceAccounts), "create").Inc()
	} else {
		want.ResourceVersion, want.UID = current.ResourceVersion, current.UID
		err = m.writer.Update(ctx, want)
		m.metrics.writes.WithLabelValues(string(ServiceAccounts), "update").Inc()
	}
	if err != nil {
		if apierrors.IsAlreadyExists(err) {
			m.recorder.Eventf(local, corev1.EventTypeWarning, ReasonNameTaken,
				"secret %s exists on the provider and was not made by ferry; offloaded pods using this service account get no token", remoteKey)
		}
		return 0, fmt.Errorf("write token secret %s: %w", remoteKey, err)
	}
	m.written.remember(remoteKey, want, false)
	klog.FromContext(ctx).V(2).Info("Wrote service account token", "serviceAccount", key, "twinNamespace", twin, "refreshAt", refreshAt)
	return refreshAt.Sub(now), nil
}

func (m *tokenManager) current(key types.NamespacedName) *corev1.Secret {
	var cached client.Object
	if o := m.remote.get(Secrets, key.Namespace, key.Name); o != nil && isTokenSecret(o) {
		cached = o
	}
	if cur := m.written.current(key, cached); cur != nil {
		return cur.(*corev1.Secret)
	}
	return nil
}

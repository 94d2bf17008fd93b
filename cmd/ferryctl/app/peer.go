package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	ferryscheme "github.com/ferry-io/ferry/api/scheme"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/controllers/peering"
)

// cluster is one side of a peering, as ferryctl reaches it.
type cluster struct {
	role string // "consumer" or "provider", for messages
	cfg  *rest.Config
	kube kubernetes.Interface
	c    client.Client
	id   ferryv1alpha1.ClusterID
}

func connect(ctx context.Context, role string, cfg *rest.Config) (*cluster, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s kubeconfig: %w", role, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: ferryscheme.Scheme()})
	if err != nil {
		return nil, fmt.Errorf("%s kubeconfig: %w", role, err)
	}
	id, err := peering.ReadClusterIdentity(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("%s cluster (%s): %w", role, cfg.Host, err)
	}
	return &cluster{role: role, cfg: cfg, kube: kube, c: c, id: id}, nil
}

func connectBoth(ctx context.Context, consumerCfg, providerCfg *rest.Config) (consumer, provider *cluster, err error) {
	if consumer, err = connect(ctx, "consumer", consumerCfg); err != nil {
		return nil, nil, err
	}
	if provider, err = connect(ctx, "provider", providerCfg); err != nil {
		return nil, nil, err
	}
	return consumer, provider, nil
}

// PeerOptions tune `ferryctl peer`.
type PeerOptions struct {
	// Resources is a fixed request; empty asks for the provider's default share.
	Resources corev1.ResourceList
	// Timeout bounds the whole peering.
	Timeout time.Duration
	// TokenLifetime of the credential issued to the consumer.
	TokenLifetime time.Duration
	// ProviderAPIServerURL is the provider's API server as the consumer
	// cluster (its controller manager and virtual kubelets) reaches it,
	// when that differs from the address ferryctl uses; empty is the
	// provider kubeconfig's server.
	ProviderAPIServerURL string
	// NodePoolLabel splits the provider's nodes into pools by this node
	// label, one virtual node per pool; empty: one virtual node.
	NodePoolLabel string
	// Fencing is the peering's fencing (docs/operations/failure-behaviour.md, "Failover and fencing"):
	// selfFencing goes on the provider's ForeignCluster for the consumer,
	// the rest on the consumer's for the provider. Zero keeps the defaults.
	Fencing ferryv1alpha1.Fencing
}

// FencingFlags turns ferryctl peer's fencing flags into a Fencing.
func FencingFlags(leaseDuration, margin time.Duration, outOfService, selfFencing bool) (ferryv1alpha1.Fencing, error) {
	f := ferryv1alpha1.Fencing{OutOfService: outOfService}
	if !selfFencing {
		f.SelfFencing = &selfFencing
		if outOfService {
			return f, fmt.Errorf("--out-of-service-failover: not with --self-fencing=false (the consumer fails over only onto a provider that fences)")
		}
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
		min  time.Duration
		to   *int32
	}{{"--lease-duration", leaseDuration, 4 * time.Second, &f.LeaseDurationSeconds}, {"--fencing-margin", margin, time.Second, &f.SafetyMarginSeconds}} {
		if d.v == 0 {
			continue
		}
		if d.v < d.min || d.v > 24*time.Hour || d.v%time.Second != 0 {
			return f, fmt.Errorf("%s %s: must be whole seconds between %s and 24h", d.flag, d.v, d.min)
		}
		*d.to = int32(d.v / time.Second)
	}
	return f, nil
}

// providerURL is where the consumer cluster reaches the provider.
func (o PeerOptions) providerURL(provider *cluster) string {
	if o.ProviderAPIServerURL != "" {
		return o.ProviderAPIServerURL
	}
	return provider.cfg.Host
}

// Peer makes the consumer use the provider: the same objects a user could
// apply by hand, then a wait until the virtual node is Ready. On failure it
// removes what it made, leaving no half-made peering.
func Peer(ctx context.Context, out io.Writer, consumerCfg, providerCfg *rest.Config, opts PeerOptions) (err error) {
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	step := stepper(out, 6)

	step("Reaching the consumer and the provider")
	consumer, provider, err := connectBoth(ctx, consumerCfg, providerCfg)
	if err != nil {
		return err
	}
	if err := checkDistinct(ctx, consumer, provider); err != nil {
		return err
	}
	reverse, err := checkNotPeered(ctx, consumer, provider)
	if err != nil {
		return err
	}
	// undo holds, newest last, how to remove what this run made: a failure
	// removes exactly that, and never an object someone else made.
	var undo []func(context.Context) error
	defer func() {
		if err == nil || len(undo) == 0 {
			return
		}
		fmt.Fprintf(out, "Peering failed; removing what was made: %v\n", err)
		rollbackCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		for i := len(undo) - 1; i >= 0; i-- {
			if rbErr := undo[i](rollbackCtx); rbErr != nil {
				err = errors.Join(err, fmt.Errorf("roll back: %w", rbErr))
			}
		}
	}()

	step(fmt.Sprintf("Creating the tenant of consumer %q on provider %q", consumer.id, provider.id))
	fcOnProvider := &ferryv1alpha1.ForeignCluster{
		ObjectMeta: metav1.ObjectMeta{Name: string(consumer.id)},
		Spec:       ferryv1alpha1.ForeignClusterSpec{ClusterID: consumer.id, Role: ferryv1alpha1.RoleConsumer, Fencing: ferryv1alpha1.Fencing{SelfFencing: opts.Fencing.SelfFencing}},
	}
	if reverse != nil {
		// The provider already offloads to the consumer: its ForeignCluster
		// for the consumer becomes both.
		fcOnProvider = reverse.onProvider
		if err := setRole(ctx, provider.c, fcOnProvider, ferryv1alpha1.RoleProvider, ferryv1alpha1.RoleConsumerAndProvider, nil); err != nil {
			return fmt.Errorf("declare consumer on provider: %w", err)
		}
		undo = append(undo, func(ctx context.Context) error {
			if err := dropConsumer(ctx, provider, fcOnProvider); err != nil {
				return fmt.Errorf("on the provider: %w", err)
			}
			return nil
		})
	} else {
		if err := provider.c.Create(ctx, fcOnProvider); err != nil {
			return fmt.Errorf("declare consumer on provider: %w", err)
		}
		undo = append(undo, func(ctx context.Context) error {
			if err := deleteAndWait(ctx, provider.c, fcOnProvider); err != nil {
				return fmt.Errorf("on the provider: %w", err)
			}
			return waitTenantGone(ctx, provider, peering.TenantNamespaceOf(fcOnProvider))
		})
	}
	tenant := peering.TenantNamespaceOf(fcOnProvider)
	if err := waitConsumerServiceAccount(ctx, provider, tenant); err != nil {
		return err
	}

	step("Issuing the consumer's credential (a bound service-account token) and checking what it may do")
	kubeconfig, err := issueKubeconfig(ctx, provider, opts.providerURL(provider), tenant, opts.TokenLifetime)
	if err != nil {
		return err
	}
	if err := waitUntilAllowed(ctx, provider, kubeconfig, tenant); err != nil {
		return err
	}

	step("Storing the credential on the consumer")
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: peering.CredentialsSecretName(provider.id), Namespace: ferryv1alpha1.SystemNamespace,
			Labels: map[string]string{ferryv1alpha1.LabelOriginCluster: string(provider.id)},
		},
		Data: map[string][]byte{ferryv1alpha1.KubeconfigSecretKey: kubeconfig},
	}
	if err := consumer.c.Create(ctx, secret); err != nil {
		return fmt.Errorf("store credential on consumer: %w", err)
	}
	undo = append(undo, func(ctx context.Context) error {
		return client.IgnoreNotFound(consumer.c.Delete(ctx, secret))
	})

	step(fmt.Sprintf("Declaring provider %q on the consumer", provider.id))
	asProvider := func(spec *ferryv1alpha1.ForeignClusterSpec) {
		spec.APIServerURL = opts.providerURL(provider)
		spec.CredentialsSecretRef = &ferryv1alpha1.SecretReference{Name: secret.Name, Namespace: secret.Namespace}
		spec.ResourceRequest = opts.Resources
		if opts.NodePoolLabel != "" {
			spec.NodePools = &ferryv1alpha1.NodePools{LabelKey: opts.NodePoolLabel}
		}
		spec.Fencing.LeaseDurationSeconds = opts.Fencing.LeaseDurationSeconds
		spec.Fencing.SafetyMarginSeconds = opts.Fencing.SafetyMarginSeconds
		spec.Fencing.OutOfService = opts.Fencing.OutOfService
	}
	fcOnConsumer := &ferryv1alpha1.ForeignCluster{
		ObjectMeta: metav1.ObjectMeta{Name: string(provider.id)},
		Spec:       ferryv1alpha1.ForeignClusterSpec{ClusterID: provider.id, Role: ferryv1alpha1.RoleProvider},
	}
	if reverse != nil {
		// The provider offloads to the consumer already: the consumer's
		// ForeignCluster for it becomes both.
		fcOnConsumer = reverse.onConsumer
		if err := setRole(ctx, consumer.c, fcOnConsumer, ferryv1alpha1.RoleConsumer, ferryv1alpha1.RoleConsumerAndProvider, asProvider); err != nil {
			return fmt.Errorf("declare provider on consumer: %w", err)
		}
		undo = append(undo, func(ctx context.Context) error {
			if err := dropProvider(ctx, consumer, fcOnConsumer); err != nil {
				return fmt.Errorf("on the consumer: %w", err)
			}
			return nil
		})
	} else {
		asProvider(&fcOnConsumer.Spec)
		if err := consumer.c.Create(ctx, fcOnConsumer); err != nil {
			return fmt.Errorf("declare provider on consumer: %w", err)
		}
		undo = append(undo, func(ctx context.Context) error {
			if err := deleteAndWait(ctx, consumer.c, fcOnConsumer); err != nil {
				return fmt.Errorf("on the consumer: %w", err)
			}
			return nil
		})
	}

	step("Waiting for the grant and the virtual node")
	var last string
	// Conditions older than this generation tell the other direction's
	// story (a peer that was a consumer only).
	generation := fcOnConsumer.Generation
	return waitFor(ctx, "the virtual node to be Ready", func(ctx context.Context) (bool, error) {
		if err := consumer.c.Get(ctx, client.ObjectKeyFromObject(fcOnConsumer), fcOnConsumer); err != nil {
			return false, err
		}
		current := func(t string) *metav1.Condition {
			c := meta.FindStatusCondition(fcOnConsumer.Status.Conditions, t)
			if c == nil || c.ObservedGeneration < generation {
				return nil
			}
			return c
		}
		if c := current(ferryv1alpha1.ForeignClusterResourcesGranted); c != nil && c.Status == metav1.ConditionFalse && c.Reason == "Refused" {
			return false, fmt.Errorf("the provider refused the request: %s", c.Message)
		}
		if c := current(ferryv1alpha1.ForeignClusterAuthenticated); c != nil && c.Status == metav1.ConditionFalse {
			return false, fmt.Errorf("the provider refused the credential: %s", c.Message)
		}
		if s := conditionSummary(current); s != last {
			fmt.Fprintf(out, "      %s\n", s)
			last = s
		}
		c := current(ferryv1alpha1.ForeignClusterVirtualNodeReady)
		return c != nil && c.Status == metav1.ConditionTrue, nil
	})
}

// ReissueCredential gives an existing peering a new credential: after the
// provider's admin revoked the old one (by deleting the tenant's
// ferry-consumer ServiceAccount), or before it expires. It replaces the
// consumer's credentials Secret; the consumer's controller manager restarts
// the virtual kubelet with it. It waits until the provider accepts it.
func ReissueCredential(ctx context.Context, out io.Writer, consumerCfg, providerCfg *rest.Config, opts PeerOptions) error {
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	step := stepper(out, 4)

	step("Reaching the consumer and the provider")
	consumer, provider, err := connectBoth(ctx, consumerCfg, providerCfg)
	if err != nil {
		return err
	}
	var fc, fcOnProvider ferryv1alpha1.ForeignCluster
	if err := consumer.c.Get(ctx, client.ObjectKey{Name: string(provider.id)}, &fc); err != nil {
		return fmt.Errorf("not peered: consumer %q has no ForeignCluster %q; run `ferryctl peer` first: %w", consumer.id, provider.id, err)
	}
	if !fc.Spec.IsProvider() || fc.Spec.CredentialsSecretRef == nil {
		return fmt.Errorf("not peered: ForeignCluster %q on consumer %q is not a provider with spec.credentialsSecretRef; run `ferryctl peer` first", fc.Name, consumer.id)
	}
	if err := provider.c.Get(ctx, client.ObjectKey{Name: string(consumer.id)}, &fcOnProvider); err != nil {
		return fmt.Errorf("not peered: provider %q has no ForeignCluster %q for consumer %q: %w", provider.id, consumer.id, consumer.id, err)
	}
	tenant := peering.TenantNamespaceOf(&fcOnProvider)

	step(fmt.Sprintf("Issuing a new credential for consumer %q on provider %q", consumer.id, provider.id))
	if err := waitConsumerServiceAccount(ctx, provider, tenant); err != nil {
		return err
	}
	// The consumer keeps reaching the provider where it did.
	server := fc.Spec.APIServerURL
	if server == "" {
		server = provider.cfg.Host
	}
	kubeconfig, err := issueKubeconfig(ctx, provider, server, tenant, opts.TokenLifetime)
	if err != nil {
		return err
	}
	if err := waitUntilAllowed(ctx, provider, kubeconfig, tenant); err != nil {
		return err
	}

	step("Replacing the credential on the consumer")
	ref := fc.Spec.CredentialsSecretRef
	var secret corev1.Secret
	if err := consumer.c.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, &secret); err != nil {
		return fmt.Errorf("read the credential Secret %s/%s on the consumer: %w", ref.Namespace, ref.Name, err)
	}
	if secret.Data == nil {
		secret.Data = map[string][]byte{}
	}
	secret.Data[ferryv1alpha1.KubeconfigSecretKey] = kubeconfig
	if err := consumer.c.Update(ctx, &secret); err != nil {
		return fmt.Errorf("store the new credential on the consumer: %w", err)
	}

	step("Waiting for the provider to accept it")
	return waitFor(ctx, "the consumer's controller manager to use the new credential", func(ctx context.Context) (bool, error) {
		if err := consumer.c.Get(ctx, client.ObjectKeyFromObject(&fc), &fc); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(fc.Status.Conditions, ferryv1alpha1.ForeignClusterAuthenticated)
		return c != nil && c.Status == metav1.ConditionTrue, nil
	})
}

// waitConsumerServiceAccount waits until the provider's tenant controller
// has made the consumer's ServiceAccount in tenant.
func waitConsumerServiceAccount(ctx context.Context, provider *cluster, tenant string) error {
	return waitFor(ctx, "the provider's controller to make the consumer's ServiceAccount in "+tenant, func(ctx context.Context) (bool, error) {
		_, err := provider.kube.CoreV1().ServiceAccounts(tenant).Get(ctx, ferryv1alpha1.ConsumerServiceAccount, metav1.GetOptions{})
		return err == nil, client.IgnoreNotFound(err)
	})
}

// issueKubeconfig asks the provider for a token of the consumer's service
// account and wraps it in a kubeconfig for server whose context names the
// tenant.
func issueKubeconfig(ctx context.Context, provider *cluster, server, tenant string, lifetime time.Duration) ([]byte, error) {
	tr, err := provider.kube.CoreV1().ServiceAccounts(tenant).CreateToken(ctx, ferryv1alpha1.ConsumerServiceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(lifetime.Seconds()))},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("issue a token for %s/%s on the provider: %w", tenant, ferryv1alpha1.ConsumerServiceAccount, err)
	}
	ca := provider.cfg.CAData
	if len(ca) == 0 && provider.cfg.CAFile != "" {
		if ca, err = os.ReadFile(provider.cfg.CAFile); err != nil {
			return nil, fmt.Errorf("read the provider's CA: %w", err)
		}
	}
	name := string(provider.id)
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name, Namespace: tenant}
	cfg.CurrentContext = name
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("encode the consumer's kubeconfig: %w", err)
	}
	return data, nil
}

// waitUntilAllowed waits until the provider lets the new credential ask for
// resources: its RBAC caches learn of a new RoleBinding a moment after it
// is made, and the consumer should not start with a Forbidden. The check
// goes where ferryctl reaches the provider, which may differ from where the
// consumer cluster does (--provider-api-server-url).
func waitUntilAllowed(ctx context.Context, provider *cluster, kubeconfig []byte, tenant string) error {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return fmt.Errorf("load the consumer's kubeconfig: %w", err)
	}
	cfg.Host = provider.cfg.Host
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("load the consumer's kubeconfig: %w", err)
	}
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: tenant, Verb: "create", Group: ferryv1alpha1.GroupVersion.Group, Resource: "resourceslices"},
	}}
	return waitFor(ctx, "the provider to authorize the consumer's credential", func(ctx context.Context) (bool, error) {
		res, err := kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			return false, fmt.Errorf("check the consumer's credential on the provider: %w", err)
		}
		return res.Status.Allowed, nil
	})
}

// checkDistinct refuses to peer a cluster with itself, by ID and by the UID
// of kube-system (two kubeconfigs may name the same cluster differently).
func checkDistinct(ctx context.Context, consumer, provider *cluster) error {
	if consumer.id == provider.id {
		return fmt.Errorf("cannot peer cluster %q with itself: the consumer and provider kubeconfigs reach clusters with the same ID", consumer.id)
	}
	a, errA := consumer.kube.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	b, errB := provider.kube.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if errA == nil && errB == nil && a.UID == b.UID {
		return fmt.Errorf("cannot peer a cluster with itself: %s and %s are the same cluster", consumer.cfg.Host, provider.cfg.Host)
	}
	return nil
}

// reversePeering is an existing peering the other way round: the provider
// offloads to the consumer. Peering makes both ForeignClusters
// ConsumerAndProvider.
type reversePeering struct {
	onConsumer, onProvider *ferryv1alpha1.ForeignCluster
}

// checkNotPeered refuses a peering that exists already, or half of one; it
// returns the peering the other way round when there is one.
func checkNotPeered(ctx context.Context, consumer, provider *cluster) (*reversePeering, error) {
	onConsumer, err := foreignCluster(ctx, consumer, provider.id)
	if err != nil {
		return nil, err
	}
	onProvider, err := foreignCluster(ctx, provider, consumer.id)
	if err != nil {
		return nil, err
	}
	switch {
	case onConsumer != nil && onConsumer.Spec.IsProvider():
		return nil, fmt.Errorf("already peered: consumer %q has ForeignCluster %q for provider %q (role %s); run `ferryctl unpeer` first", consumer.id, onConsumer.Name, provider.id, onConsumer.Spec.Role)
	case onProvider != nil && onProvider.Spec.IsConsumer():
		return nil, fmt.Errorf("already peered: provider %q already serves consumer %q (ForeignCluster %q, role %s); run `ferryctl unpeer` first", provider.id, consumer.id, onProvider.Name, onProvider.Spec.Role)
	case onConsumer == nil && onProvider == nil:
		return nil, nil
	case onConsumer != nil && onProvider != nil:
		// Consumer there, Provider here: the reverse direction.
		return &reversePeering{onConsumer: onConsumer, onProvider: onProvider}, nil
	case onConsumer != nil:
		return nil, fmt.Errorf("half a peering: consumer %q has ForeignCluster %q (role %s) but provider %q has none for it; remove it by hand or peer %q to %q again first", consumer.id, onConsumer.Name, onConsumer.Spec.Role, provider.id, provider.id, consumer.id)
	default:
		return nil, fmt.Errorf("half a peering: provider %q has ForeignCluster %q (role %s) but consumer %q has none for it; remove it by hand or peer %q to %q again first", provider.id, onProvider.Name, onProvider.Spec.Role, consumer.id, provider.id, consumer.id)
	}
}

// foreignCluster is c's ForeignCluster for peer, nil when it has none.
func foreignCluster(ctx context.Context, c *cluster, peer ferryv1alpha1.ClusterID) (*ferryv1alpha1.ForeignCluster, error) {
	var fc ferryv1alpha1.ForeignCluster
	err := c.c.Get(ctx, client.ObjectKey{Name: string(peer)}, &fc)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("check for an existing peering on the %s: %w", c.role, err)
	}
	return &fc, nil
}

// setRole changes a ForeignCluster's role from one to another, and with
// edit its other fields. It retries on conflicts (ferry's controllers
// write the object's status and finalizers meanwhile), and refuses if the
// role is no longer from.
func setRole(ctx context.Context, c client.Client, fc *ferryv1alpha1.ForeignCluster, from, to ferryv1alpha1.PeeringRole, edit func(*ferryv1alpha1.ForeignClusterSpec)) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(fc), fc); err != nil {
			return err
		}
		if fc.Spec.Role != from {
			return fmt.Errorf("its role changed meanwhile: %s, not %s", fc.Spec.Role, from)
		}
		fc.Spec.Role = to
		if edit != nil {
			edit(&fc.Spec)
		}
		return c.Update(ctx, fc)
	})
	if err != nil {
		return fmt.Errorf("make ForeignCluster %s %s: %w", fc.Name, to, err)
	}
	return nil
}

// dropProvider ends, on a consumer, one direction of a peering both ways:
// the ForeignCluster of a peer that is consumer and provider becomes a
// Consumer; once ferry's peer controller has removed the virtual node, the
// remote request and the credential (its finalizer gone), the fields only a
// provider uses are cleared.
func dropProvider(ctx context.Context, consumer *cluster, fc *ferryv1alpha1.ForeignCluster) error {
	if err := setRole(ctx, consumer.c, fc, ferryv1alpha1.RoleConsumerAndProvider, ferryv1alpha1.RoleConsumer, nil); err != nil {
		return err
	}
	if err := waitFinalizerGone(ctx, consumer.c, fc, peering.PeerFinalizer, "the virtual node and the credential of "+fc.Name+" to be removed"); err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := consumer.c.Get(ctx, client.ObjectKeyFromObject(fc), fc); err != nil {
			return err
		}
		fc.Spec.APIServerURL, fc.Spec.CredentialsSecretRef, fc.Spec.ResourceRequest, fc.Spec.StorageClassMap, fc.Spec.NodePools = "", nil, nil, nil, nil
		return consumer.c.Update(ctx, fc)
	})
}

// dropConsumer ends, on a provider, one direction of a peering both ways:
// the ForeignCluster of a peer that is consumer and provider becomes a
// Provider, and ferry's tenant controller removes the peer's tenant (which
// revokes its credential).
func dropConsumer(ctx context.Context, provider *cluster, fc *ferryv1alpha1.ForeignCluster) error {
	tenant := peering.TenantNamespaceOf(fc)
	if err := setRole(ctx, provider.c, fc, ferryv1alpha1.RoleConsumerAndProvider, ferryv1alpha1.RoleProvider, nil); err != nil {
		return err
	}
	if err := waitFinalizerGone(ctx, provider.c, fc, peering.TenantFinalizer, "the tenant of "+fc.Name+" to be removed"); err != nil {
		return err
	}
	return waitTenantGone(ctx, provider, tenant)
}

func waitFinalizerGone(ctx context.Context, c client.Client, fc *ferryv1alpha1.ForeignCluster, finalizer, what string) error {
	return waitFor(ctx, what+" by ferry-controller-manager", func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(fc), fc); err != nil {
			return false, err
		}
		return !controllerutil.ContainsFinalizer(fc, finalizer), nil
	})
}

// ErrNotPeered is the error of Unpeer when the consumer does not offload
// to the provider: nothing of such a peering is on either side. ferryctl
// unpeer then exits 1, as kubectl delete of a missing object does, unless
// --ignore-not-found.
var ErrNotPeered = errors.New("not peered")

// Unpeer removes a peering from both sides. When nothing of it is on
// either side it removes nothing and returns an error wrapping
// ErrNotPeered that names both clusters. Of a peering both ways it removes
// this direction and keeps the other.
func Unpeer(ctx context.Context, out io.Writer, consumerCfg, providerCfg *rest.Config, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	consumer, provider, err := connectBoth(ctx, consumerCfg, providerCfg)
	if err != nil {
		return err
	}
	return unpeer(ctx, out, consumer, provider)
}

func unpeer(ctx context.Context, out io.Writer, consumer, provider *cluster) error {
	if err := checkPeered(ctx, consumer, provider); err != nil {
		return err
	}
	step := stepper(out, 3)
	step(fmt.Sprintf("Removing provider %q from the consumer (virtual node, request, credential)", provider.id))
	onConsumer, err := foreignCluster(ctx, consumer, provider.id)
	if err != nil {
		return err
	}
	switch {
	case onConsumer == nil || onConsumer.Spec.Role == ferryv1alpha1.RoleProvider:
		if err := deleteAndWait(ctx, consumer.c, &ferryv1alpha1.ForeignCluster{ObjectMeta: metav1.ObjectMeta{Name: string(provider.id)}}); err != nil {
			return fmt.Errorf("on the consumer: %w", err)
		}
	case onConsumer.Spec.Role == ferryv1alpha1.RoleConsumerAndProvider:
		fmt.Fprintf(out, "      %q keeps offloading to %q: its ForeignCluster becomes a Consumer\n", provider.id, consumer.id)
		if err := dropProvider(ctx, consumer, onConsumer); err != nil {
			return fmt.Errorf("on the consumer: %w", err)
		}
	default:
		fmt.Fprintf(out, "      %q does not offload to %q (ForeignCluster %q is a %s): left alone\n", consumer.id, provider.id, onConsumer.Name, onConsumer.Spec.Role)
	}
	// A credential stored before the ForeignCluster existed (a failed peer).
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: peering.CredentialsSecretName(provider.id), Namespace: ferryv1alpha1.SystemNamespace}}
	if err := consumer.c.Delete(ctx, secret); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete credential on the consumer: %w", err)
	}
	step(fmt.Sprintf("Removing consumer %q from the provider (tenant, revoking the credential)", consumer.id))
	onProvider, err := foreignCluster(ctx, provider, consumer.id)
	if err != nil {
		return err
	}
	tenant := peering.TenantNamespace(consumer.id)
	switch {
	case onProvider == nil || onProvider.Spec.Role == ferryv1alpha1.RoleConsumer:
		if onProvider != nil {
			tenant = peering.TenantNamespaceOf(onProvider)
		}
		if err := deleteAndWait(ctx, provider.c, &ferryv1alpha1.ForeignCluster{ObjectMeta: metav1.ObjectMeta{Name: string(consumer.id)}}); err != nil {
			return fmt.Errorf("on the provider: %w", err)
		}
	case onProvider.Spec.Role == ferryv1alpha1.RoleConsumerAndProvider:
		fmt.Fprintf(out, "      %q keeps offloading to %q: its ForeignCluster becomes a Provider\n", provider.id, consumer.id)
		tenant = peering.TenantNamespaceOf(onProvider)
		if err := dropConsumer(ctx, provider, onProvider); err != nil {
			return fmt.Errorf("on the provider: %w", err)
		}
	default:
		fmt.Fprintf(out, "      %q does not serve %q (ForeignCluster %q is a %s): left alone\n", provider.id, consumer.id, onProvider.Name, onProvider.Spec.Role)
	}
	step("Waiting for the tenant namespace to go")
	return waitTenantGone(ctx, provider, tenant)
}

// checkPeered returns an error wrapping ErrNotPeered when nothing of the
// consumer's use of the provider is left on either side: no ForeignCluster
// for the other in this direction's role, no credential on the consumer
// (a failed peer may leave one) and no tenant namespace on the provider.
func checkPeered(ctx context.Context, consumer, provider *cluster) error {
	onConsumer, err := foreignCluster(ctx, consumer, provider.id)
	if err != nil {
		return err
	}
	if onConsumer != nil && onConsumer.Spec.Role != ferryv1alpha1.RoleConsumer {
		return nil
	}
	onProvider, err := foreignCluster(ctx, provider, consumer.id)
	if err != nil {
		return err
	}
	if onProvider != nil && onProvider.Spec.Role != ferryv1alpha1.RoleProvider {
		return nil
	}
	var secret corev1.Secret
	err = consumer.c.Get(ctx, client.ObjectKey{Namespace: ferryv1alpha1.SystemNamespace, Name: peering.CredentialsSecretName(provider.id)}, &secret)
	if !apierrors.IsNotFound(err) {
		if err != nil {
			return fmt.Errorf("check for a credential on the consumer: %w", err)
		}
		return nil
	}
	var tenant corev1.Namespace
	err = provider.c.Get(ctx, client.ObjectKey{Name: peering.TenantNamespace(consumer.id)}, &tenant)
	if !apierrors.IsNotFound(err) {
		if err != nil {
			return fmt.Errorf("check for a tenant on the provider: %w", err)
		}
		return nil
	}
	return fmt.Errorf("%q does not offload to %q: %w (no ForeignCluster, credential or tenant of this peering on either cluster)", consumer.id, provider.id, ErrNotPeered)
}

// waitTenantGone waits until the provider has deleted a consumer's tenant
// namespace, and with it the credential's service account.
func waitTenantGone(ctx context.Context, provider *cluster, tenant string) error {
	return waitFor(ctx, "tenant namespace "+tenant+" to be deleted", func(ctx context.Context) (bool, error) {
		_, err := provider.kube.CoreV1().Namespaces().Get(ctx, tenant, metav1.GetOptions{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
}

func deleteAndWait(ctx context.Context, c client.Client, obj client.Object) error {
	if err := c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete %s: %w", obj.GetName(), err)
	}
	return waitFor(ctx, fmt.Sprintf("ForeignCluster %s to be cleaned up by ferry-controller-manager", obj.GetName()), func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
}

// waitFor polls done every 200ms until it is true, fails, or ctx ends; the
// timeout error says what was awaited.
func waitFor(ctx context.Context, what string, done func(context.Context) (bool, error)) error {
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, done)
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("timed out waiting for %s (raise --timeout?)", what)
	}
	return err
}

func stepper(out io.Writer, total int) func(string) {
	n := 0
	return func(msg string) {
		n++
		fmt.Fprintf(out, "[%d/%d] %s\n", n, total, msg)
	}
}

func conditionSummary(condition func(string) *metav1.Condition) string {
	s := ""
	for _, t := range []string{ferryv1alpha1.ForeignClusterAPIServerReady, ferryv1alpha1.ForeignClusterAuthenticated, ferryv1alpha1.ForeignClusterResourcesGranted, ferryv1alpha1.ForeignClusterVirtualNodeReady} {
		status := "Unknown"
		if c := condition(t); c != nil {
			status = string(c.Status)
		}
		s += fmt.Sprintf("%s=%s ", t, status)
	}
	return s
}

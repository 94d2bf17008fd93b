package app

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryscheme "github.com/ferry-io/ferry/api/scheme"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/controllers/offloading"
)

// target holds the flags naming the cluster a command acts on and how long
// it waits.
type target struct {
	kubeconfig, context string
	wait                bool
	timeout             time.Duration
}

func (t *target) bind(cmd *cobra.Command, waitFor string) {
	f := cmd.Flags()
	f.StringVar(&t.kubeconfig, "kubeconfig", "", "kubeconfig of the consumer cluster (default: $KUBECONFIG or ~/.kube/config)")
	f.StringVar(&t.context, "context", "", "context in the kubeconfig (default: the current one)")
	f.BoolVar(&t.wait, "wait", false, "wait until "+waitFor+", printing each cluster's phase")
	f.DurationVar(&t.timeout, "timeout", 2*time.Minute, "with --wait, give up after this long")
}

func (t *target) client() (client.Client, error) {
	if t.timeout <= 0 {
		return nil, fmt.Errorf("--timeout %s: must be positive", t.timeout)
	}
	cfg, err := loadConfig("--kubeconfig", t.kubeconfig, t.context)
	if err != nil {
		return nil, err
	}
	return newClient(cfg)
}

func newClient(cfg *rest.Config) (client.Client, error) {
	c, err := client.New(cfg, client.Options{Scheme: ferryscheme.Scheme()})
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	return c, nil
}

func newOffloadCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "offload",
		Short: "Extend a namespace to peered providers",
	}
	var t target
	var podStrategy, mappingStrategy, remoteName, selector, schedulerName, preference string
	ns := &cobra.Command{
		Use:   "namespace NAME",
		Short: "Offload a namespace: twin namespaces in the selected providers, pods may run there",
		Long: `offload namespace creates (or updates) the namespace's NamespaceOffloading
"offloading". ferry-controller-manager then asks each selected provider for a
twin namespace and labels the namespace ferry.io/offloading-enabled=true,
unless every selected provider refuses the twin namespace (its name taken
there: NamespaceConflict): the namespace is then left as it was, its new pods
run on this cluster, and the offloading proceeds once the cause is removed.

--cluster-selector is a label selector over the providers' virtual nodes, as
kubectl -l takes it: "region=eu,tier in (gold,silver),!gpu". Its expressions
are ANDed into one NodeSelectorTerm (= and == are In, != is NotIn, key and
!key are Exists and DoesNotExist, > and < are Gt and Lt); for several ORed
terms, edit spec.clusterSelector. Empty selects every peered provider.`,
		Example: `  ferryctl offload namespace shop --cluster-selector 'topology.kubernetes.io/region=eu' --wait
  ferryctl offload namespace shop --namespace-mapping-strategy SelectedName --remote-namespace-name shop-eu
  ferryctl offload namespace batch --placement-preference LocalFirst --scheduler-name ferry-scheduler`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec, err := offloadingSpec(podStrategy, mappingStrategy, remoteName, selector, cmd.Flags().Changed("namespace-mapping-strategy"))
			if err != nil {
				return err
			}
			spec.SchedulerName, err = schedulerNameFlag(schedulerName)
			if err != nil {
				return err
			}
			spec.PlacementPreference, err = placementPreferenceFlag(preference, spec.PodOffloadingStrategy)
			if err != nil {
				return err
			}
			if err := validateNamespaceArg(args[0]); err != nil {
				return err
			}
			c, err := t.client()
			if err != nil {
				return err
			}
			return Offload(cmd.Context(), cmd.OutOrStdout(), c, args[0], spec, t.wait, t.timeout)
		},
	}
	t.bind(ns, "every selected cluster's twin namespace is Ready")
	f := ns.Flags()
	f.StringVar(&podStrategy, "pod-offloading-strategy", string(ferryv1alpha1.PodOffloadingLocalAndRemote), "where the namespace's pods may run: Local, Remote or LocalAndRemote")
	f.StringVar(&mappingStrategy, "namespace-mapping-strategy", string(ferryv1alpha1.NamespaceMappingDefaultName),
		"name of the twin namespaces: DefaultName (<namespace>-<this cluster ID>), EnforceSameName (the namespace's own) or SelectedName (--remote-namespace-name)")
	f.StringVar(&remoteName, "remote-namespace-name", "", "the twin namespaces' name with SelectedName (implies it)")
	f.StringVar(&selector, "cluster-selector", "", "label selector over the providers' virtual nodes, e.g. 'region=eu,tier in (a,b),!gpu' (default: every provider)")
	completeValues(ns, "pod-offloading-strategy", ferryv1alpha1.PodOffloadingLocal, ferryv1alpha1.PodOffloadingRemote, ferryv1alpha1.PodOffloadingLocalAndRemote)
	completeValues(ns, "namespace-mapping-strategy", ferryv1alpha1.NamespaceMappingDefaultName, ferryv1alpha1.NamespaceMappingEnforceSameName, ferryv1alpha1.NamespaceMappingSelectedName)
	f.StringVar(&schedulerName, "scheduler-name", "", "scheduler ferry's pod webhook gives the namespace's pods that may run remotely, e.g. ferry-scheduler (a pod naming its own keeps it; default: the one each pod asks for)")
	f.StringVar(&preference, "placement-preference", string(ferryv1alpha1.PlacementPreferenceNone),
		"with LocalAndRemote, the side the namespace's pods prefer while it has room: None, LocalFirst (burst to providers) or RemoteFirst")
	completeValues(ns, "placement-preference", ferryv1alpha1.PlacementPreferenceNone, ferryv1alpha1.PlacementPreferenceLocalFirst, ferryv1alpha1.PlacementPreferenceRemoteFirst)
	cmd.AddCommand(ns)
	return cmd
}

func newUnoffloadCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "unoffload",
		Short: "Take a namespace back from the providers",
	}
	var t target
	ns := &cobra.Command{
		Use:   "namespace NAME",
		Short: "Unoffload a namespace: its offloaded pods are drained, then the twin namespaces deleted",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateNamespaceArg(args[0]); err != nil {
				return err
			}
			c, err := t.client()
			if err != nil {
				return err
			}
			return Unoffload(cmd.Context(), cmd.OutOrStdout(), c, args[0], t.wait, t.timeout)
		},
	}
	t.bind(ns, "the pods are drained and the twin namespaces are gone")
	cmd.AddCommand(ns)
	return cmd
}

func validateNamespaceArg(ns string) error {
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return fmt.Errorf("namespace %q: %s", ns, errs[0])
	}
	return nil
}

// offloadingSpec builds a NamespaceOffloading spec from the flags; errors
// name the flag and the accepted values. --remote-namespace-name implies
// SelectedName unless another strategy was asked for explicitly.
func offloadingSpec(podStrategy, mappingStrategy, remoteName, selector string, mappingSet bool) (ferryv1alpha1.NamespaceOffloadingSpec, error) {
	var spec ferryv1alpha1.NamespaceOffloadingSpec
	pod, err := oneOf("--pod-offloading-strategy", podStrategy, ferryv1alpha1.PodOffloadingLocal, ferryv1alpha1.PodOffloadingRemote, ferryv1alpha1.PodOffloadingLocalAndRemote)
	if err != nil {
		return spec, err
	}
	if remoteName != "" && !mappingSet {
		mappingStrategy = string(ferryv1alpha1.NamespaceMappingSelectedName)
	}
	mapping, err := oneOf("--namespace-mapping-strategy", mappingStrategy, ferryv1alpha1.NamespaceMappingDefaultName, ferryv1alpha1.NamespaceMappingEnforceSameName, ferryv1alpha1.NamespaceMappingSelectedName)
	if err != nil {
		return spec, err
	}
	switch {
	case mapping == ferryv1alpha1.NamespaceMappingSelectedName && remoteName == "":
		return spec, fmt.Errorf("--remote-namespace-name is required with --namespace-mapping-strategy SelectedName")
	case mapping != ferryv1alpha1.NamespaceMappingSelectedName && remoteName != "":
		return spec, fmt.Errorf("--remote-namespace-name is only used with --namespace-mapping-strategy SelectedName, not %s", mapping)
	}
	if remoteName != "" {
		if errs := validation.IsDNS1123Label(remoteName); len(errs) > 0 {
			return spec, fmt.Errorf("--remote-namespace-name %q: not a valid namespace name: %s", remoteName, errs[0])
		}
	}
	sel, err := ParseClusterSelector(selector)
	if err != nil {
		return spec, err
	}
	return ferryv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: pod, NamespaceMappingStrategy: mapping, RemoteNamespaceName: remoteName, ClusterSelector: sel}, nil
}

// completeValues makes shell completion offer values for the flag.
func completeValues[T ~string](cmd *cobra.Command, flag string, values ...T) {
	names := make([]string, len(values))
	for i, v := range values {
		names[i] = string(v)
	}
	_ = cmd.RegisterFlagCompletionFunc(flag, cobra.FixedCompletions(names, cobra.ShellCompDirectiveNoFileComp))
}

// schedulerNameFlag checks --scheduler-name as the API does: a DNS subdomain
// or empty.
func schedulerNameFlag(name string) (string, error) {
	if name == "" {
		return "", nil
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return "", fmt.Errorf("--scheduler-name %q: not a valid scheduler name: %s", name, errs[0])
	}
	return name, nil
}

// placementPreferenceFlag checks --placement-preference as the API does:
// one of the values, and other than None only with LocalAndRemote.
func placementPreferenceFlag(value string, strategy ferryv1alpha1.PodOffloadingStrategy) (ferryv1alpha1.PlacementPreference, error) {
	pref, err := oneOf("--placement-preference", value, ferryv1alpha1.PlacementPreferenceNone, ferryv1alpha1.PlacementPreferenceLocalFirst, ferryv1alpha1.PlacementPreferenceRemoteFirst)
	if err != nil {
		return "", err
	}
	if pref != ferryv1alpha1.PlacementPreferenceNone && strategy != ferryv1alpha1.PodOffloadingLocalAndRemote {
		return "", fmt.Errorf("--placement-preference %s needs --pod-offloading-strategy LocalAndRemote, not %s", pref, strategy)
	}
	return pref, nil
}

// oneOf checks that value is one of the accepted values, case-sensitively as
// the API takes them, and says which are accepted when it is not.
func oneOf[T ~string](flag, value string, accepted ...T) (T, error) {
	names := make([]string, len(accepted))
	for i, a := range accepted {
		if string(a) == value {
			return a, nil
		}
		names[i] = string(a)
	}
	return "", fmt.Errorf("%s %q: must be one of %s", flag, value, strings.Join(names, ", "))
}

// Offload creates or updates the NamespaceOffloading of namespace with spec
// and, with wait, follows its status until every selected cluster is Ready,
// one fails, or timeout passes.
func Offload(ctx context.Context, out io.Writer, c client.Client, namespace string, spec ferryv1alpha1.NamespaceOffloadingSpec, wait bool, timeout time.Duration) error {
	if err := offloading.ValidateNamespace(namespace); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := c.Get(ctx, client.ObjectKey{Name: namespace}, &corev1.Namespace{}); err != nil {
		return fmt.Errorf("namespace %s: %w", namespace, err)
	}
	nso := &ferryv1alpha1.NamespaceOffloading{ObjectMeta: metav1.ObjectMeta{Name: ferryv1alpha1.NamespaceOffloadingName, Namespace: namespace}}
	err := c.Get(ctx, client.ObjectKeyFromObject(nso), nso)
	switch {
	case apierrors.IsNotFound(err):
		nso.Spec = spec
		if err := c.Create(ctx, nso); err != nil {
			return fmt.Errorf("create NamespaceOffloading %s/%s: %w", namespace, nso.Name, err)
		}
		fmt.Fprintf(out, "Offloading namespace %s (pods: %s, twin names: %s).\n", namespace, spec.PodOffloadingStrategy, spec.NamespaceMappingStrategy)
	case err != nil:
		return fmt.Errorf("read NamespaceOffloading %s/%s: %w", namespace, nso.Name, err)
	case !nso.DeletionTimestamp.IsZero():
		return fmt.Errorf("namespace %s is being unoffloaded; offload it again once that is done", namespace)
	case equality.Semantic.DeepEqual(nso.Spec, spec):
		fmt.Fprintf(out, "Namespace %s is already offloaded with these settings.\n", namespace)
	default:
		nso.Spec = spec
		if err := c.Update(ctx, nso); err != nil {
			return fmt.Errorf("update NamespaceOffloading %s/%s: %w", namespace, nso.Name, err)
		}
		fmt.Fprintf(out, "Updated the offloading of namespace %s (pods: %s, twin names: %s).\n", namespace, spec.PodOffloadingStrategy, spec.NamespaceMappingStrategy)
	}
	if !wait {
		return nil
	}
	progress := phasePrinter(out)
	var last string
	err = waitFor(ctx, fmt.Sprintf("namespace %s to be offloaded", namespace), func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(nso), nso); err != nil {
			return false, fmt.Errorf("read NamespaceOffloading %s/%s: %w", namespace, nso.Name, err)
		}
		if nso.Status.ObservedGeneration != nso.Generation {
			return false, nil
		}
		progress(nso.Status.Clusters)
		ready := meta.FindStatusCondition(nso.Status.Conditions, ferryv1alpha1.NamespaceOffloadingReady)
		if ready == nil {
			return false, nil
		}
		last = ready.Reason + ": " + ready.Message
		switch {
		case ready.Status == metav1.ConditionTrue:
			return true, nil
		case ready.Reason == offloading.ReasonForbiddenNamespace || ready.Reason == offloading.ReasonInvalidClusterSelector ||
			ready.Reason == offloading.ReasonNamespaceMappingChanged || anyFailed(nso.Status.Clusters):
			return false, fmt.Errorf("namespace %s is not offloaded: %s", namespace, last)
		}
		return false, nil
	})
	if err != nil {
		if ctx.Err() != nil && last != "" {
			return fmt.Errorf("%w; last state: %s", err, last)
		}
		return err
	}
	printClusters(out, nso.Status.Clusters)
	return nil
}

// Unoffload deletes the NamespaceOffloading of namespace and, with wait,
// follows the drain until it is gone.
func Unoffload(ctx context.Context, out io.Writer, c client.Client, namespace string, wait bool, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	nso := &ferryv1alpha1.NamespaceOffloading{ObjectMeta: metav1.ObjectMeta{Name: ferryv1alpha1.NamespaceOffloadingName, Namespace: namespace}}
	if err := c.Delete(ctx, nso); apierrors.IsNotFound(err) {
		fmt.Fprintf(out, "Namespace %s is not offloaded.\n", namespace)
		return nil
	} else if err != nil {
		return fmt.Errorf("delete NamespaceOffloading %s/%s: %w", namespace, nso.Name, err)
	}
	fmt.Fprintf(out, "Unoffloading namespace %s.\n", namespace)
	if !wait {
		return nil
	}
	progress := phasePrinter(out)
	err := waitFor(ctx, fmt.Sprintf("namespace %s to be unoffloaded (pods drained, twin namespaces deleted)", namespace), func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(nso), nso)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, fmt.Errorf("read NamespaceOffloading %s/%s: %w", namespace, nso.Name, err)
		}
		progress(nso.Status.Clusters)
		return false, nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Namespace %s is unoffloaded.\n", namespace)
	return nil
}

func anyFailed(cs []ferryv1alpha1.ClusterOffloadingStatus) bool {
	for _, c := range cs {
		if c.Phase == ferryv1alpha1.OffloadingFailed {
			return true
		}
	}
	return false
}

// phasePrinter returns a function printing each cluster's phase when it
// changes: "  <cluster>: <phase> (twin namespace <name>[; <reason>])".
func phasePrinter(out io.Writer) func([]ferryv1alpha1.ClusterOffloadingStatus) {
	seen := map[ferryv1alpha1.ClusterID]string{}
	return func(cs []ferryv1alpha1.ClusterOffloadingStatus) {
		for _, c := range cs {
			line := fmt.Sprintf("  %s: %s (twin namespace %s", c.ClusterID, c.Phase, c.TwinNamespace)
			if r := meta.FindStatusCondition(c.Conditions, ferryv1alpha1.ConditionReady); r != nil && r.Status != metav1.ConditionTrue {
				line += "; " + r.Reason
			}
			line += ")"
			if seen[c.ClusterID] != line {
				seen[c.ClusterID] = line
				fmt.Fprintln(out, line)
			}
		}
	}
}

// clusterColumns are the columns of an offloading's clusters.
var clusterColumns = []metav1.TableColumnDefinition{
	column("Cluster", 0, "the provider"),
	column("Twin Namespace", 0, "the namespace standing for this one there"),
	column("Phase", 0, "the twin namespace's phase"),
}

// printClusters prints an offloading's clusters as a table.
func printClusters(out io.Writer, cs []ferryv1alpha1.ClusterOffloadingStatus) {
	rows := make([][]string, 0, len(cs))
	for _, c := range cs {
		rows = append(rows, []string{string(c.ClusterID), c.TwinNamespace, string(c.Phase)})
	}
	_ = (&output{format: outputTable}).printTable(stringTable(clusterColumns, rows), out)
}

package app

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-io/ferry/api/placement"
	ferryscheme "github.com/ferry-io/ferry/api/scheme"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/storage"
)

func newStatusCommand() *cobra.Command {
	var kubeconfig, context string
	var o output
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show this cluster's peers (role, health, what it offloads to each and what each offloads to it, used and granted, virtual node, network, storage), the network fabric and where the data of ferry's claims lives",
		Long: `status prints one row per peer. OUT columns are what this cluster offloads
to the peer (the peer is its provider): the virtual node, and cpu, memory and
pods used there out of what the provider granted. IN columns are what the
peer offloads to this cluster (the peer is its consumer): its ShadowPods'
requests out of what this cluster granted it. A peer peered both ways fills
both. -o wide adds the less important columns; -o json, yaml or name prints
the objects behind the tables instead.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			cfg, err := loadConfig("--kubeconfig", kubeconfig, context)
			if err != nil {
				return err
			}
			c, err := client.New(cfg, client.Options{Scheme: ferryscheme.Scheme()})
			if err != nil {
				return fmt.Errorf("--kubeconfig: %w", err)
			}
			st, err := readStatus(cmd.Context(), c)
			if err != nil {
				return err
			}
			if !o.tables() {
				return o.printObjects(st.objects(), cmd.OutOrStdout())
			}
			return printStatus(cmd.OutOrStdout(), &o, st, time.Now())
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (default: $KUBECONFIG or ~/.kube/config)")
	cmd.Flags().StringVar(&context, "context", "", "context in the kubeconfig (default: the current one)")
	o.bind(cmd, "the objects behind the tables: ForeignClusters, VirtualNodes, ResourceSlices, PeeringQuotas, NetworkConfigs, the ferry class's volumes")
	return cmd
}

// clusterStatus is what status reads of a cluster.
type clusterStatus struct {
	peerSources
	NetworkConfigs []ferryv1alpha1.NetworkConfig
	// hidden says what this credential may not read, and so is not shown.
	hidden []string
}

// readStatus reads the objects status shows; a kind this credential may
// not list is left out and named in hidden.
func readStatus(ctx context.Context, c client.Client) (*clusterStatus, error) {
	st := &clusterStatus{peerSources: peerSources{PodsByNode: map[string][]corev1.Pod{}}}
	var fcs ferryv1alpha1.ForeignClusterList
	if err := c.List(ctx, &fcs); err != nil {
		return nil, fmt.Errorf("list ForeignClusters: %w", err)
	}
	st.ForeignClusters = fcs.Items
	list := func(what string, l client.ObjectList, opts ...client.ListOption) error {
		err := c.List(ctx, l, opts...)
		if apierrors.IsForbidden(err) {
			st.hidden = append(st.hidden, fmt.Sprintf("%s: %v", what, err))
			return nil
		}
		if err != nil {
			return fmt.Errorf("list %s: %w", what, err)
		}
		return nil
	}
	var (
		vns     ferryv1alpha1.VirtualNodeList
		nsos    ferryv1alpha1.NamespaceOffloadingList
		rslices ferryv1alpha1.ResourceSliceList
		sps     ferryv1alpha1.ShadowPodList
		twins   ferryv1alpha1.TwinNamespaceList
		quotas  ferryv1alpha1.PeeringQuotaList
		pvs     corev1.PersistentVolumeList
		ncs     ferryv1alpha1.NetworkConfigList
	)
	for what, l := range map[string]client.ObjectList{"VirtualNodes": &vns, "NamespaceOffloadings": &nsos, "ResourceSlices": &rslices, "ShadowPods": &sps,
		"TwinNamespaces": &twins, "PeeringQuotas": &quotas, "PersistentVolumes": &pvs, "NetworkConfigs": &ncs} {
		if err := list(what, l); err != nil {
			return nil, err
		}
	}
	st.VirtualNodes, st.Offloadings, st.ResourceSlices, st.ShadowPods = vns.Items, nsos.Items, rslices.Items, sps.Items
	st.TwinNamespaces, st.PeeringQuotas, st.NetworkConfigs = twins.Items, quotas.Items, ncs.Items
	for i := range pvs.Items {
		if pvs.Items[i].Spec.StorageClassName == ferryv1alpha1.StorageClassVirtual {
			st.Volumes = append(st.Volumes, pvs.Items[i])
		}
	}
	for i := range vns.Items {
		node := vns.Items[i].Node()
		var pods corev1.PodList
		if err := list("pods on "+node, &pods, client.MatchingFields{"spec.nodeName": node}); err != nil {
			return nil, err
		}
		st.PodsByNode[node] = pods.Items
	}
	sort.Strings(st.hidden)
	return st, nil
}

// objects are the objects behind the tables, for -o json, yaml and name.
func (st *clusterStatus) objects() []runtime.Object {
	var objs []runtime.Object
	objs = appendObjects(objs, st.ForeignClusters)
	objs = appendObjects(objs, st.VirtualNodes)
	objs = appendObjects(objs, st.ResourceSlices)
	objs = appendObjects(objs, st.PeeringQuotas)
	objs = appendObjects(objs, st.NetworkConfigs)
	return appendObjects(objs, st.Volumes)
}

// appendObjects appends a pointer to each of items.
func appendObjects[T any, P interface {
	*T
	runtime.Object
}](objs []runtime.Object, items []T) []runtime.Object {
	for i := range items {
		objs = append(objs, P(&items[i]))
	}
	return objs
}

// networkColumns are the network table's: per peer, where its pods appear
// here and where this cluster appears there, and the gateway's tunnel.
var networkColumns = []metav1.TableColumnDefinition{
	column("Peer", 0, "the peer's cluster ID"),
	column("Pod CIDR", 0, "the peer's pod CIDR"),
	column("Seen Here As", 0, "where the peer's pods appear in this cluster"),
	column("This Cluster There", 0, "where this cluster's pods appear in the peer"),
	column("API Server There", 0, "where the peer's pods reach this cluster's API server"),
	column("Tunnel", 0, "the gateway's tunnel to the peer"),
	column("Handshake", 0, "the tunnel's last handshake"),
	column("RTT", 0, "the last round trip measured"),
	column("Network", 0, "the ForeignCluster's NetworkReady"),
}

// claimColumns are the claims table's: where each claim of ferry's class
// keeps its data.
var claimColumns = []metav1.TableColumnDefinition{
	column("Claim", 0, "namespace/name of the claim"),
	column("Data In", 0, "the provider holding its data, or this cluster"),
	column("Held By", 0, "the claim holding the data there"),
	column("Capacity", 0, "the volume's capacity"),
	column("Phase", 0, "the phase of the claim holding the data"),
}

// printStatus prints the peers, the network fabric and the claims tables,
// and what could not be read.
func printStatus(out io.Writer, o *output, st *clusterStatus, now time.Time) error {
	if len(st.ForeignClusters) == 0 {
		fmt.Fprintln(out, "No peers.")
	}
	if err := o.printTable(peersTable(st.peerSources, now), out); err != nil {
		return err
	}
	local, peers := networkRows(st.NetworkConfigs, st.ForeignClusters, now)
	if local != nil {
		fmt.Fprintf(out, "\nthis cluster: pod CIDR %s, service CIDR %s, external CIDR %s", local[0], local[1], local[2])
		if local[3] != "" {
			fmt.Fprintf(out, ", active gateway replica %s", local[3])
		}
		fmt.Fprintln(out)
	}
	if len(peers) > 0 {
		if local == nil {
			fmt.Fprintln(out)
		}
		if err := o.printTable(stringTable(networkColumns, peers), out); err != nil {
			return err
		}
	}
	if rows := claimRows(st.Volumes); len(rows) > 0 {
		fmt.Fprintln(out)
		if err := o.printTable(stringTable(claimColumns, rows), out); err != nil {
			return err
		}
	}
	if len(st.hidden) > 0 {
		fmt.Fprintln(out, "\nnot shown, this credential may not list:")
		for _, h := range st.hidden {
			fmt.Fprintln(out, "  "+h)
		}
	}
	return nil
}

// networkRows is this cluster's pod, service and external CIDRs (nil when
// its NetworkConfig does not exist), and one row per peer NetworkConfig:
// peer, its pod CIDR, where its pods appear here, where this cluster's pods
// and API server appear there (known on a provider's NetworkConfig only),
// and the ForeignCluster's NetworkReady.
func networkRows(ncs []ferryv1alpha1.NetworkConfig, fcs []ferryv1alpha1.ForeignCluster, now time.Time) ([]string, [][]string) {
	var local []string
	var rows [][]string
	for _, nc := range ncs {
		switch nc.Labels[ferryv1alpha1.LabelNetworkConfig] {
		case ferryv1alpha1.NetworkConfigLocal:
			if nc.Namespace == ferryv1alpha1.SystemNamespace {
				local = []string{orDash(nc.Spec.PodCIDR), orDash(nc.Spec.ServiceCIDR), orDash(nc.Spec.ExternalCIDR), ""}
				if g := nc.Status.Gateway; g != nil && g.Replica != "" {
					local[3] = g.Replica // the gateway Lease's holder
				}
			}
		case ferryv1alpha1.NetworkConfigPeer:
			seen := orDash(nc.Status.RemappedPodCIDR)
			if c := meta.FindStatusCondition(nc.Status.Conditions, ferryv1alpha1.NetworkConfigRemapped); c != nil && c.Status != "True" {
				seen = "not mapped (" + c.Reason + ")"
			}
			network := "-"
			for i := range fcs {
				if fcs[i].Spec.ClusterID == nc.Spec.ClusterID {
					network = conditionStatus(&fcs[i], ferryv1alpha1.ForeignClusterNetworkReady)
				}
			}
			tunnel, handshake, rtt := tunnelColumns(&nc, now)
			rows = append(rows, []string{string(nc.Spec.ClusterID), nc.Spec.PodCIDR, seen, orDash(nc.Status.PodCIDRAtPeer), orDash(nc.Status.APIServerAddressAtPeer),
				tunnel, handshake, rtt, network})
		}
	}
	slices.SortFunc(rows, func(a, b []string) int {
		if c := strings.Compare(a[0], b[0]); c != 0 {
			return c
		}
		return strings.Compare(fmt.Sprint(a[3] == "-"), fmt.Sprint(b[3] == "-"))
	})
	// A peer both consumer and provider has two NetworkConfigs: keep the
	// one that knows this cluster's place there.
	rows = slices.CompactFunc(rows, func(a, b []string) bool { return a[0] == b[0] })
	return local, rows
}

// tunnelColumns are the gateway's tunnel to a peer: up or down (why), the
// last handshake's age and the last round trip measured.
func tunnelColumns(nc *ferryv1alpha1.NetworkConfig, now time.Time) (string, string, string) {
	state, handshake, rtt := "-", "-", "-"
	if c := meta.FindStatusCondition(nc.Status.Conditions, ferryv1alpha1.NetworkConfigTunnelUp); c != nil {
		state = "up"
		if c.Status != metav1.ConditionTrue {
			state = "down (" + c.Reason + ")"
		}
	}
	if t := nc.Status.Tunnel; t != nil {
		if t.LastHandshakeTime != nil {
			handshake = duration.HumanDuration(now.Sub(t.LastHandshakeTime.Time)) + " ago"
		}
		if t.RoundTripTime != nil {
			rtt = t.RoundTripTime.Round(10 * time.Microsecond).String()
		}
	}
	return state, handshake, rtt
}

func conditionStatus(fc *ferryv1alpha1.ForeignCluster, t string) string {
	c := meta.FindStatusCondition(fc.Status.Conditions, t)
	switch {
	case c == nil:
		return "-"
	case c.Status == "True":
		return "Ready"
	default:
		return "NotReady (" + c.Reason + ")"
	}
}

// claimRows describes, sorted by claim, each claim of ferry's virtual
// storage class by its volume: where its data lives (a provider, or this
// cluster), the claim holding it there, its capacity and that claim's phase.
func claimRows(pvs []corev1.PersistentVolume) [][]string {
	var rows [][]string
	for i := range pvs {
		pv := &pvs[i]
		if pv.Spec.StorageClassName != ferryv1alpha1.StorageClassVirtual || pv.Spec.ClaimRef == nil {
			continue
		}
		where, heldBy, phase := "this cluster", pv.Annotations[storage.AnnotationBackingClaim], string(pv.Status.Phase)
		if c := placement.VolumeCluster(pv); c != placement.LocalCluster {
			where, heldBy, phase = string(c), pv.Annotations[storage.AnnotationRemoteClaim], pv.Annotations[storage.AnnotationRemotePhase]
		}
		capacity := pv.Spec.Capacity[corev1.ResourceStorage]
		rows = append(rows, []string{pv.Spec.ClaimRef.Namespace + "/" + pv.Spec.ClaimRef.Name, where, orDash(heldBy), capacity.String(), orDash(phase)})
	}
	slices.SortFunc(rows, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	return rows
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

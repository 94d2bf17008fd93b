package app

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
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
	"github.com/ferry-io/ferry/controllers/peering"
	"github.com/ferry-io/ferry/storage"
)

func newStatusCommand() *cobra.Command {
	var kubeconfig, context, output string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show this cluster's peers (role, API server health, grant, virtual node, age), the network fabric's CIDRs and remaps, and where the data of ferry's claims lives",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			printer, err := objectPrinter(output)
			if err != nil {
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
			var fcs ferryv1alpha1.ForeignClusterList
			if err := c.List(cmd.Context(), &fcs); err != nil {
				return fmt.Errorf("list ForeignClusters: %w", err)
			}
			if printer != nil {
				objs, err := statusObjects(cmd.Context(), c, fcs.Items)
				if err != nil {
					return err
				}
				return printObjects(printer, output, objs, cmd.OutOrStdout())
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "PEER\tROLE\tAPI SERVER\tGRANTED\tVIRTUAL NODE\tAGE")
			for _, fc := range fcs.Items {
				granted, node := "-", "-"
				if c := meta.FindStatusCondition(fc.Status.Conditions, ferryv1alpha1.ForeignClusterResourcesGranted); c != nil {
					granted = c.Message
					if c.Status != "True" {
						granted = string(c.Status) + ": " + c.Reason
					}
				}
				if c := meta.FindStatusCondition(fc.Status.Conditions, ferryv1alpha1.ForeignClusterVirtualNodeReady); c != nil {
					node = peering.VirtualNodeName(fc.Spec.ClusterID) + " (Ready=" + string(c.Status) + ")"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", fc.Spec.ClusterID, fc.Spec.Role, conditionStatus(&fc, ferryv1alpha1.ForeignClusterAPIServerReady),
					granted, node, duration.HumanDuration(time.Since(fc.CreationTimestamp.Time)))
			}
			if err := w.Flush(); err != nil {
				return err
			}
			if err := printNetwork(cmd, c, fcs.Items); err != nil {
				return err
			}
			var pvs corev1.PersistentVolumeList
			if err := c.List(cmd.Context(), &pvs); apierrors.IsForbidden(err) {
				fmt.Fprintf(cmd.OutOrStdout(), "\nwhere claims' data lives is not shown: %v\n", err)
				return nil
			} else if err != nil {
				return fmt.Errorf("list PersistentVolumes: %w", err)
			}
			rows := claimRows(pvs.Items)
			if len(rows) == 0 {
				return nil
			}
			fmt.Fprintln(cmd.OutOrStdout())
			w = tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "CLAIM\tDATA IN\tHELD BY\tCAPACITY\tPHASE")
			for _, r := range rows {
				fmt.Fprintln(w, strings.Join(r, "\t"))
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (default: $KUBECONFIG or ~/.kube/config)")
	cmd.Flags().StringVar(&context, "context", "", "context in the kubeconfig (default: the current one)")
	cmd.Flags().StringVarP(&output, "output", "o", "", "json, yaml or name: print the objects behind the tables (ForeignClusters, NetworkConfigs, the ferry class's volumes) as kubectl does")
	completeValues(cmd, "output", outputJSON, outputYAML, outputName)
	return cmd
}

// statusObjects are the objects status shows: the ForeignClusters, the
// NetworkConfigs and the volumes of ferry's storage class, those this
// credential may list.
func statusObjects(ctx context.Context, c client.Client, fcs []ferryv1alpha1.ForeignCluster) ([]runtime.Object, error) {
	var objs []runtime.Object
	for i := range fcs {
		objs = append(objs, &fcs[i])
	}
	var ncs ferryv1alpha1.NetworkConfigList
	if err := c.List(ctx, &ncs); err != nil && !apierrors.IsForbidden(err) {
		return nil, fmt.Errorf("list NetworkConfigs: %w", err)
	}
	for i := range ncs.Items {
		objs = append(objs, &ncs.Items[i])
	}
	var pvs corev1.PersistentVolumeList
	if err := c.List(ctx, &pvs); err != nil && !apierrors.IsForbidden(err) {
		return nil, fmt.Errorf("list PersistentVolumes: %w", err)
	}
	for i := range pvs.Items {
		if pvs.Items[i].Spec.StorageClassName == ferryv1alpha1.StorageClassVirtual {
			objs = append(objs, &pvs.Items[i])
		}
	}
	return objs, nil
}

// printNetwork shows the network fabric's view: this cluster's networks,
// then per peer where its pods appear here and where this cluster's appear
// there.
func printNetwork(cmd *cobra.Command, c client.Client, fcs []ferryv1alpha1.ForeignCluster) error {
	out := cmd.OutOrStdout()
	var ncs ferryv1alpha1.NetworkConfigList
	if err := c.List(cmd.Context(), &ncs); apierrors.IsForbidden(err) {
		fmt.Fprintf(out, "\nthe network fabric is not shown: %v\n", err)
		return nil
	} else if err != nil {
		return fmt.Errorf("list NetworkConfigs: %w", err)
	}
	local, peers := networkRows(ncs.Items, fcs, time.Now())
	if local == nil && len(peers) == 0 {
		return nil
	}
	fmt.Fprintln(out)
	if local != nil {
		fmt.Fprintf(out, "this cluster: pod CIDR %s, service CIDR %s, external CIDR %s\n", local[0], local[1], local[2])
	}
	if len(peers) == 0 {
		return nil
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "PEER\tPOD CIDR\tSEEN HERE AS\tTHIS CLUSTER THERE\tAPI SERVER THERE\tTUNNEL\tHANDSHAKE\tRTT\tNETWORK")
	for _, r := range peers {
		fmt.Fprintln(w, strings.Join(r, "\t"))
	}
	return w.Flush()
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
				local = []string{orDash(nc.Spec.PodCIDR), orDash(nc.Spec.ServiceCIDR), orDash(nc.Spec.ExternalCIDR)}
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

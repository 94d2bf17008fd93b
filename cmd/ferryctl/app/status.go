package app

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/controllers/peering"
)

func newStatusCommand() *cobra.Command {
	var kubeconfig, context string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show this cluster's peers: role, API server health, grant, virtual node, age",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig("--kubeconfig", kubeconfig, context)
			if err != nil {
				return err
			}
			c, err := client.New(cfg, client.Options{Scheme: peering.Scheme()})
			if err != nil {
				return fmt.Errorf("--kubeconfig: %w", err)
			}
			var fcs ferryv1alpha1.ForeignClusterList
			if err := c.List(cmd.Context(), &fcs); err != nil {
				return fmt.Errorf("list ForeignClusters: %w", err)
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
			return w.Flush()
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (default: $KUBECONFIG or ~/.kube/config)")
	cmd.Flags().StringVar(&context, "context", "", "context in the kubeconfig (default: the current one)")
	return cmd
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

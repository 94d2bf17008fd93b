package app

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// moveFlags are the flags of ferryctl move volume.
type moveFlags struct {
	t            target
	out          output
	to, name     string
	deleteSource bool
	confirm      bool
	poll         time.Duration
}

func newMoveCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "move",
		Short: "Move a claim's data to another cluster",
	}
	var f moveFlags
	vol := &cobra.Command{
		Use:   "volume NAMESPACE/CLAIM --to CLUSTER",
		Short: "Move the data of a claim of the ferry storage class to another cluster; its next pod runs there",
		Long: `move volume creates a VolumeMove for the claim and, with --wait (the default),
follows it, printing the bytes copied, the rate and the time left, until the
claim points at the verified copy or the move is refused or fails (non-zero
exit, with the reason).

The claim's pods must be stopped first (scale the workload to 0): a move is
refused, naming them, while a pod uses the claim. The data is streamed between
two short-lived pods over the network fabric, verified by SHA-256, and only
then is the claim re-pointed (made again under its name, bound to a volume in
the target), so its next pod runs where the data now is. The source volume is
kept until the move is confirmed (--confirm now, or later: ferryctl move
confirm), or deleted at once with --delete-source; until confirmed, ferryctl
move revert points the claim back at it without copying.

--to is a provider's cluster ID, or this cluster's own to bring the data home.`,
		Example: `  ferryctl move volume shop/data-db-0 --to rome
  ferryctl move volume shop/data-db-0 --to milan --confirm
  ferryctl move volume shop/data-db-0 --to rome --wait=false -o yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, claim, err := namespacedArg(args[0], "NAMESPACE/CLAIM")
			if err != nil {
				return err
			}
			if err := f.out.validate(); err != nil {
				return err
			}
			if err := ferryv1alpha1.ValidateClusterID("--to", f.to); err != nil {
				return err
			}
			c, err := f.t.client()
			if err != nil {
				return err
			}
			mv := newVolumeMove(ns, claim, f)
			return MoveVolume(cmd.Context(), cmd.OutOrStdout(), c, mv, f.t.wait, f.t.timeout, f.poll, f.out)
		},
	}
	f.t.bind(vol, "the claim points at the copy, or the move is refused or fails")
	fl := vol.Flags()
	_ = fl.Set("wait", "true")
	fl.Lookup("wait").DefValue = "true"
	_ = fl.Set("timeout", "30m")
	fl.Lookup("timeout").DefValue = "30m0s"
	fl.StringVar(&f.to, "to", "", "cluster ID the data goes to: a provider's, or this cluster's own (required)")
	_ = vol.MarkFlagRequired("to")
	fl.StringVar(&f.name, "name", "", "name of the VolumeMove (default: CLAIM-to-CLUSTER)")
	fl.BoolVar(&f.deleteSource, "delete-source", false, "delete the source volume as soon as the claim points at the verified copy (sourceRetention Delete); no way back")
	fl.BoolVar(&f.confirm, "confirm", false, "confirm the move now: the kept source volume is deleted once the claim points at the verified copy")
	fl.DurationVar(&f.poll, "poll", time.Second, "how often the move is read while waiting")
	f.out.bind(vol, "the VolumeMove once it ends (table: progress lines)")
	cmd.AddCommand(vol, newMoveDecisionCommand("confirm", "Confirm a move: its kept source volume is deleted", "spec.confirmed"),
		newMoveDecisionCommand("revert", "Revert a move not confirmed yet: the claim points at its kept source volume again, the copy is deleted", "spec.revert"))
	return cmd
}

// newMoveDecisionCommand sets spec.confirmed or spec.revert of a VolumeMove.
func newMoveDecisionCommand(verb, short, field string) *cobra.Command {
	var t target
	cmd := &cobra.Command{
		Use:   verb + " NAMESPACE/VOLUMEMOVE",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, name, err := namespacedArg(args[0], "NAMESPACE/VOLUMEMOVE")
			if err != nil {
				return err
			}
			c, err := t.client()
			if err != nil {
				return err
			}
			key := field[len("spec."):]
			patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{%q:true}}`, key))
			mv := &ferryv1alpha1.VolumeMove{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
			if err := c.Patch(cmd.Context(), mv, patch); err != nil {
				return fmt.Errorf("set %s of VolumeMove %s/%s: %w", field, ns, name, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "VolumeMove %s/%s: %s set.\n", ns, name, field)
			if !t.wait {
				return nil
			}
			return followMove(cmd.Context(), cmd.OutOrStdout(), c, mv, t.timeout, time.Second, func(mv *ferryv1alpha1.VolumeMove) bool {
				return mv.Status.Phase.Done()
			})
		},
	}
	t.bind(cmd, "the move has applied it")
	return cmd
}

// namespacedArg splits NAMESPACE/NAME, naming what is expected.
func namespacedArg(arg, what string) (string, string, error) {
	ns, name, ok := strings.Cut(arg, "/")
	if !ok || ns == "" || name == "" {
		return "", "", fmt.Errorf("%q: must be %s", arg, what)
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return "", "", fmt.Errorf("%q: namespace %q: %s", arg, ns, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return "", "", fmt.Errorf("%q: name %q: %s", arg, name, strings.Join(errs, "; "))
	}
	return ns, name, nil
}

// newVolumeMove is the VolumeMove the flags ask for.
func newVolumeMove(ns, claim string, f moveFlags) *ferryv1alpha1.VolumeMove {
	name := f.name
	if name == "" {
		name = claim + "-to-" + f.to
		if len(name) > validation.DNS1123SubdomainMaxLength {
			name = name[:validation.DNS1123SubdomainMaxLength]
		}
	}
	retention := ferryv1alpha1.RetentionKeep
	if f.deleteSource {
		retention = ferryv1alpha1.RetentionDelete
	}
	return &ferryv1alpha1.VolumeMove{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: ferryv1alpha1.VolumeMoveSpec{ClaimName: claim, TargetCluster: ferryv1alpha1.ClusterID(f.to),
			SourceRetention: retention, Confirmed: f.confirm},
	}
}

// MoveVolume creates mv and, with wait, follows it until the claim points
// at the copy (nil) or the move is refused or fails (an error with the
// reason).
func MoveVolume(ctx context.Context, out io.Writer, c client.Client, mv *ferryv1alpha1.VolumeMove, wait bool, timeout, poll time.Duration, o output) error {
	if err := c.Create(ctx, mv); apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("VolumeMove %s/%s already exists (--name picks another; kubectl get vmove -n %s shows it)", mv.Namespace, mv.Name, mv.Namespace)
	} else if err != nil {
		return fmt.Errorf("create VolumeMove %s/%s: %w", mv.Namespace, mv.Name, err)
	}
	if o.tables() {
		fmt.Fprintf(out, "VolumeMove %s/%s created: claim %s to cluster %s.\n", mv.Namespace, mv.Name, mv.Spec.ClaimName, mv.Spec.TargetCluster)
	}
	if wait {
		quiet := io.Discard
		if o.tables() {
			quiet = out
		}
		err := followMove(ctx, quiet, c, mv, timeout, poll, func(mv *ferryv1alpha1.VolumeMove) bool {
			return mv.Status.Phase.Done() || mv.Status.Phase == ferryv1alpha1.MoveAwaitingConfirmation
		})
		if err != nil || o.tables() {
			return err
		}
	}
	if o.tables() {
		return nil
	}
	return o.printObjects([]runtime.Object{mv}, out)
}

// followMove reads mv every poll, printing its phase changes and progress,
// until done says so; the outcome is MoveOutcome's.
func followMove(ctx context.Context, out io.Writer, c client.Client, mv *ferryv1alpha1.VolumeMove, timeout, poll time.Duration, done func(*ferryv1alpha1.VolumeMove) bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := ""
	key := client.ObjectKeyFromObject(mv)
	for {
		if err := c.Get(ctx, key, mv); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("VolumeMove %s not done after --timeout %s (phase %s)", key, timeout, mv.Status.Phase)
			}
			return fmt.Errorf("read VolumeMove %s: %w", key, err)
		}
		if line := MoveLine(mv); line != last {
			fmt.Fprintln(out, line)
			last = line
		}
		if done(mv) {
			return MoveOutcome(mv)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("VolumeMove %s not done after --timeout %s (phase %s; it goes on: kubectl get vmove -n %s %s)", key, timeout, orPhase(mv.Status.Phase), key.Namespace, key.Name)
		case <-time.After(poll):
		}
	}
}

func orPhase(p ferryv1alpha1.VolumeMovePhase) ferryv1alpha1.VolumeMovePhase {
	if p == "" {
		return ferryv1alpha1.MovePending
	}
	return p
}

// MoveOutcome is nil for a move whose claim points at the copy (or that
// reverted as asked), else an error with its reason and message.
func MoveOutcome(mv *ferryv1alpha1.VolumeMove) error {
	c := meta.FindStatusCondition(mv.Status.Conditions, ferryv1alpha1.VolumeMoveReady)
	switch mv.Status.Phase {
	case ferryv1alpha1.MoveAwaitingConfirmation, ferryv1alpha1.MoveSucceeded:
		return nil
	case ferryv1alpha1.MoveReverted:
		if mv.Spec.Revert {
			return nil
		}
	}
	if c == nil {
		return fmt.Errorf("VolumeMove %s/%s %s", mv.Namespace, mv.Name, orPhase(mv.Status.Phase))
	}
	return fmt.Errorf("VolumeMove %s/%s %s: %s: %s", mv.Namespace, mv.Name, orPhase(mv.Status.Phase), c.Reason, c.Message)
}

// MoveLine is one line of a move's state: its phase and, while copying,
// bytes, rate and time left.
func MoveLine(mv *ferryv1alpha1.VolumeMove) string {
	st := mv.Status
	phase := orPhase(st.Phase)
	reason, msg := "", ""
	if c := meta.FindStatusCondition(st.Conditions, ferryv1alpha1.VolumeMoveReady); c != nil {
		reason, msg = c.Reason, c.Message
	}
	switch {
	case phase == ferryv1alpha1.MoveCopying && st.Progress.TotalBytes > 0:
		p := st.Progress
		eta := "unknown"
		if p.EtaSeconds >= 0 {
			eta = (time.Duration(p.EtaSeconds) * time.Second).String()
		}
		return fmt.Sprintf("%s (attempt %d): %s of %s (%.0f%%), %s/s, ETA %s", phase, st.Attempts, bytesIEC(p.BytesCopied), bytesIEC(p.TotalBytes),
			100*float64(p.BytesCopied)/float64(p.TotalBytes), bytesIEC(p.BytesPerSecond), eta)
	case msg != "":
		return fmt.Sprintf("%s: %s: %s", phase, reason, msg)
	}
	return string(phase)
}

// bytesIEC prints n bytes with a binary unit, as kubectl prints quantities.
func bytesIEC(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

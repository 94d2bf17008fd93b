package app

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

func moveIn(phase ferryv1alpha1.VolumeMovePhase, reason, msg string) *ferryv1alpha1.VolumeMove {
	mv := &ferryv1alpha1.VolumeMove{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "m"}, Status: ferryv1alpha1.VolumeMoveStatus{Phase: phase}}
	if reason != "" {
		mv.Status.Conditions = []metav1.Condition{{Type: ferryv1alpha1.VolumeMoveReady, Status: metav1.ConditionFalse, Reason: reason, Message: msg}}
	}
	return mv
}

func TestMoveLine(t *testing.T) {
	mv := moveIn(ferryv1alpha1.MoveCopying, ferryv1alpha1.MoveReasonCopying, "copying")
	mv.Status.Attempts = 1
	mv.Status.Progress = ferryv1alpha1.VolumeMoveProgress{BytesCopied: 128 << 20, TotalBytes: 256 << 20, BytesPerSecond: 32 << 20, EtaSeconds: 4}
	if got, want := MoveLine(mv), "Copying (attempt 1): 128.0 MiB of 256.0 MiB (50%), 32.0 MiB/s, ETA 4s"; got != want {
		t.Fatalf("MoveLine = %q, want %q", got, want)
	}
	if got := MoveLine(moveIn(ferryv1alpha1.MoveRefused, "WorkloadRunning", "pods web-0 use claim data")); got != "Refused: WorkloadRunning: pods web-0 use claim data" {
		t.Fatalf("MoveLine = %q", got)
	}
	if got := MoveLine(moveIn("", "", "")); got != "Pending" {
		t.Fatalf("MoveLine = %q", got)
	}
}

func TestMoveOutcome(t *testing.T) {
	for _, ok := range []*ferryv1alpha1.VolumeMove{moveIn(ferryv1alpha1.MoveAwaitingConfirmation, "Moved", ""), moveIn(ferryv1alpha1.MoveSucceeded, "Moved", "")} {
		if err := MoveOutcome(ok); err != nil {
			t.Errorf("%s: %v", ok.Status.Phase, err)
		}
	}
	err := MoveOutcome(moveIn(ferryv1alpha1.MoveRefused, "WorkloadRunning", "pods web-0 use claim data"))
	if err == nil || !strings.Contains(err.Error(), "WorkloadRunning") || !strings.Contains(err.Error(), "web-0") {
		t.Fatalf("refusal: %v", err)
	}
	if err := MoveOutcome(moveIn(ferryv1alpha1.MoveFailed, "CopyFailed", "3 attempts")); err == nil {
		t.Fatal("a failed move must be an error")
	}
	reverted := moveIn(ferryv1alpha1.MoveReverted, "Reverted", "")
	if MoveOutcome(reverted) == nil {
		t.Fatal("a revert nobody asked for must be an error")
	}
	reverted.Spec.Revert = true
	if err := MoveOutcome(reverted); err != nil {
		t.Fatalf("asked-for revert: %v", err)
	}
}

func TestNamespacedArg(t *testing.T) {
	if ns, n, err := namespacedArg("shop/data-web-0", "NAMESPACE/CLAIM"); err != nil || ns != "shop" || n != "data-web-0" {
		t.Fatalf("= %q %q %v", ns, n, err)
	}
	for _, bad := range []string{"data", "/data", "shop/", "Shop/data", "shop/Data_x"} {
		if _, _, err := namespacedArg(bad, "NAMESPACE/CLAIM"); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestNewVolumeMove(t *testing.T) {
	mv := newVolumeMove("shop", "data", moveFlags{to: "rome", deleteSource: true})
	if mv.Name != "data-to-rome" || mv.Spec.ClaimName != "data" || mv.Spec.TargetCluster != "rome" || mv.Spec.SourceRetention != ferryv1alpha1.RetentionDelete || mv.Spec.Confirmed {
		t.Fatalf("%+v", mv)
	}
	mv = newVolumeMove("shop", "data", moveFlags{to: "rome", name: "x", confirm: true})
	if mv.Name != "x" || mv.Spec.SourceRetention != ferryv1alpha1.RetentionKeep || !mv.Spec.Confirmed {
		t.Fatalf("%+v", mv)
	}
}

func TestBytesIEC(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 268435456: "256.0 MiB", 3 << 30: "3.0 GiB"} {
		if got := bytesIEC(n); got != want {
			t.Errorf("bytesIEC(%d) = %q, want %q", n, got, want)
		}
	}
}

package move

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

func TestParseProgress(t *testing.T) {
	log := "starting\n{\"bytes\":10,\"totalBytes\":100,\"bytesPerSecond\":5,\"etaSeconds\":18}\n{\"bytes\":20,\"totalBytes\":100,\"bytesPerSecond\":10,\"etaSeconds\":8}\n{\"bytes\":3"
	p, ok := ParseProgress(log)
	if !ok || p != (Progress{Bytes: 20, TotalBytes: 100, BytesPerSecond: 10, EtaSeconds: 8}) {
		t.Fatalf("ParseProgress = %+v, %t; want the last whole line", p, ok)
	}
	if p, ok := ParseProgress(`{"bytes":0,"totalBytes":100,"bytesPerSecond":0,"etaSeconds":-1}`); !ok || p.EtaSeconds != -1 {
		t.Errorf("an unknown ETA (-1) must be read: %+v, %t", p, ok)
	}
	for _, bad := range []string{"", "no json here", `{"bytes":-1,"totalBytes":1}`, `{"bytes":1,"totalBytes":1,"etaSeconds":-2}`} {
		if p, ok := ParseProgress(bad); ok {
			t.Errorf("ParseProgress(%q) = %+v, want none", bad, p)
		}
	}
}

func TestParseResult(t *testing.T) {
	digest := strings.Repeat("ab", 32)
	r, err := ParseResult(`{"bytes":268435456,"files":1,"sha256":"` + digest + `"}` + "\n")
	if err != nil || r != (Result{Bytes: 268435456, Files: 1, SHA256: digest}) {
		t.Fatalf("ParseResult = %+v, %v", r, err)
	}
	for _, bad := range []string{"", "connection reset by peer", `{"bytes":1,"files":1}`, `{"bytes":1,"files":1,"sha256":"xyz"}`, `{"bytes":-1,"files":1,"sha256":"` + digest + `"}`} {
		if _, err := ParseResult(bad); err == nil {
			t.Errorf("ParseResult(%q) accepted: a copy without a digest must never re-point a claim", bad)
		}
	}
}

func FuzzParseResult(f *testing.F) {
	f.Add(`{"bytes":1,"files":1,"sha256":"` + strings.Repeat("0", 64) + `"}`)
	f.Add("{")
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseResult(s)
		if err == nil && (len(r.SHA256) != 64 || r.Bytes < 0 || r.Files < 0) {
			t.Fatalf("ParseResult(%q) = %+v without error", s, r)
		}
	})
}

func FuzzParseProgress(f *testing.F) {
	f.Add(`{"bytes":1,"totalBytes":2,"bytesPerSecond":1,"etaSeconds":1}`)
	f.Add("x\n{")
	f.Fuzz(func(t *testing.T, s string) {
		p, ok := ParseProgress(s)
		if ok && (p.Bytes < 0 || p.TotalBytes < 0 || p.BytesPerSecond < 0 || p.EtaSeconds < -1) {
			t.Fatalf("ParseProgress(%q) = %+v", s, p)
		}
	})
}

func podWith(name string, phase corev1.PodPhase, claims ...string) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{Phase: phase}}
	for _, c := range claims {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: c, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c}}})
	}
	return p
}

func TestPodsUsing(t *testing.T) {
	pods := []corev1.Pod{
		podWith("web-1", corev1.PodRunning, "data-web-1"),
		podWith("web-0", corev1.PodPending, "data-web-0"),
		podWith("backup", corev1.PodRunning, "other", "data-web-0"),
		podWith("old", corev1.PodSucceeded, "data-web-0"),
		podWith("crashed", corev1.PodFailed, "data-web-0"),
	}
	got := PodsUsing(pods, "data-web-0")
	if strings.Join(got, ",") != "backup,web-0" {
		t.Fatalf("PodsUsing = %v, want [backup web-0] (ended pods do not count)", got)
	}
	if got := PodsUsing(pods, "nothing"); len(got) != 0 {
		t.Fatalf("PodsUsing(nothing) = %v", got)
	}
}

func moveOf(name, claim string, created time.Time, phase ferryv1alpha1.VolumeMovePhase) ferryv1alpha1.VolumeMove {
	return ferryv1alpha1.VolumeMove{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name), CreationTimestamp: metav1.NewTime(created)},
		Spec:       ferryv1alpha1.VolumeMoveSpec{ClaimName: claim},
		Status:     ferryv1alpha1.VolumeMoveStatus{Phase: phase},
	}
}

func TestActiveMoveBefore(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 1, 0, 0, 0, time.UTC)
	first := moveOf("a", "data", t0, ferryv1alpha1.MoveCopying)
	second := moveOf("b", "data", t0.Add(time.Second), "")
	if got := ActiveMoveBefore([]ferryv1alpha1.VolumeMove{first, second}, &second); got == nil || got.Name != "a" {
		t.Fatalf("second move: got %v, want a", got)
	}
	if got := ActiveMoveBefore([]ferryv1alpha1.VolumeMove{first, second}, &first); got != nil {
		t.Fatalf("first move held back by %s", got.Name)
	}
	// Awaiting confirmation still holds the claim; a done one does not.
	waiting := moveOf("a", "data", t0, ferryv1alpha1.MoveAwaitingConfirmation)
	if got := ActiveMoveBefore([]ferryv1alpha1.VolumeMove{waiting, second}, &second); got == nil {
		t.Fatal("a move awaiting confirmation must hold the claim")
	}
	for _, p := range []ferryv1alpha1.VolumeMovePhase{ferryv1alpha1.MoveFailed, ferryv1alpha1.MoveRefused, ferryv1alpha1.MoveSucceeded, ferryv1alpha1.MoveReverted} {
		done := moveOf("a", "data", t0, p)
		if got := ActiveMoveBefore([]ferryv1alpha1.VolumeMove{done, second}, &second); got != nil {
			t.Errorf("a move %s holds the claim", p)
		}
	}
	// Another claim is another matter.
	other := moveOf("c", "other", t0, ferryv1alpha1.MoveCopying)
	if got := ActiveMoveBefore([]ferryv1alpha1.VolumeMove{other, second}, &second); got != nil {
		t.Fatalf("move of another claim holds this one: %s", got.Name)
	}
	// Two pending moves made in the same second: the first by name goes.
	x, y := moveOf("x", "data", t0, ""), moveOf("y", "data", t0, "")
	if ActiveMoveBefore([]ferryv1alpha1.VolumeMove{x, y}, &x) != nil || ActiveMoveBefore([]ferryv1alpha1.VolumeMove{x, y}, &y) == nil {
		t.Fatal("of two moves made together, exactly the first by name must go")
	}
}

func TestTranslate(t *testing.T) {
	for _, c := range []struct{ ip, from, to, want string }{
		{"10.244.1.7", "10.244.0.0/16", "10.70.0.0/16", "10.70.1.7"},
		{"10.244.1.7", "10.244.0.0/20", "10.80.16.0/20", "10.80.17.7"},
	} {
		got, err := Translate(c.ip, c.from, c.to)
		if err != nil || got != c.want {
			t.Errorf("Translate(%s, %s, %s) = %q, %v; want %s", c.ip, c.from, c.to, got, err, c.want)
		}
	}
	for _, bad := range [][3]string{{"10.1.0.1", "10.244.0.0/16", "10.70.0.0/16"}, {"10.244.0.1", "10.244.0.0/16", "10.70.0.0/24"}, {"x", "10.244.0.0/16", "10.70.0.0/16"}} {
		if got, err := Translate(bad[0], bad[1], bad[2]); err == nil {
			t.Errorf("Translate(%v) = %s, want an error", bad, got)
		}
	}
}

func TestRouteOf(t *testing.T) {
	if r := RouteOf("home", "home", "rome"); r.Relay {
		t.Error("local to provider needs no relay")
	}
	if r := RouteOf("home", "rome", "home"); r.Relay {
		t.Error("provider to local needs no relay")
	}
	if r := RouteOf("home", "rome", "milan"); !r.Relay {
		t.Error("provider to provider goes through a relay in this cluster")
	}
}

func TestClaimBoundTo(t *testing.T) {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data-web-0", Namespace: "shop", UID: "old",
			Labels: map[string]string{"app": "web", ferryv1alpha1.LabelClusterID: "home"},
			Annotations: map[string]string{
				ferryv1alpha1.AnnotationRequestedStorageClass: "standard",
				annBindCompleted: "yes", annBoundByController: "yes", "volume.kubernetes.io/selected-node": "n1", annStorageProvisioner: "storage.ferry.io/virtual",
			},
			OwnerReferences: []metav1.OwnerReference{{Kind: "StatefulSet", Name: "web", UID: "s"}},
		},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pvc-old", StorageClassName: ptr.To(ferryv1alpha1.StorageClassVirtual),
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}},
	}
	saved, err := saveClaim(pvc)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ClaimBoundTo("shop", "data-web-0", saved, "pvc-new", "rome")
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.VolumeName != "pvc-new" || got.UID != "" || got.Name != "data-web-0" || got.Namespace != "shop" {
		t.Fatalf("claim made again: %+v", got.ObjectMeta)
	}
	if got.Labels["app"] != "web" || got.Labels[ferryv1alpha1.LabelClusterID] != "rome" || len(got.OwnerReferences) != 1 {
		t.Fatalf("labels or owners lost: %v %v", got.Labels, got.OwnerReferences)
	}
	if got.Annotations[ferryv1alpha1.AnnotationRequestedStorageClass] != "standard" {
		t.Fatal("the requested class is lost")
	}
	for _, k := range []string{annBindCompleted, annBoundByController, "volume.kubernetes.io/selected-node", annStorageProvisioner} {
		if _, ok := got.Annotations[k]; ok {
			t.Errorf("annotation %s of the old binding kept", k)
		}
	}
	if _, err := ClaimBoundTo("shop", "x", "{", "pv", "rome"); err == nil {
		t.Error("a broken saved claim must be an error")
	}
}

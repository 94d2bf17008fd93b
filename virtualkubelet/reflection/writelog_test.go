package reflection

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func secretAt(rv string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "twin", Name: "db", ResourceVersion: rv}}
}

// TestWriteLogForgetsAWriteTheInformerSawDeleted: a repair the informer saw
// and then saw deleted, before the reflector looked again, must not stand
// for a copy: the copy is made again.
func TestWriteLogForgetsAWriteTheInformerSawDeleted(t *testing.T) {
	key := types.NamespacedName{Namespace: "twin", Name: "db"}
	l := newWriteLog()
	l.remember(key, secretAt("5"), false)
	if l.current(key, nil) == nil {
		t.Fatal("a write the informer has not seen yet must stand for the copy (no second create)")
	}
	l.seenDeleted(key, secretAt("3")) // an older deletion, from before the write
	if l.current(key, nil) == nil {
		t.Fatal("a deletion older than the write forgot it")
	}
	l.seenDeleted(key, secretAt("6"))
	if got := l.current(key, nil); got != nil {
		t.Errorf("current = %v after the informer saw the copy deleted, want nil", got)
	}
}

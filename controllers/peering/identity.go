package peering

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// +kubebuilder:rbac:groups="",namespace=ferry-system,resources=configmaps,verbs=get;create

// EnsureClusterIdentity records id as this cluster's ClusterID, or checks it
// against the one recorded: a cluster's ID never changes, since peers label
// everything they exchange with it.
func EnsureClusterIdentity(ctx context.Context, c client.Client, id ferryv1alpha1.ClusterID) error {
	if err := ferryv1alpha1.ValidateClusterID("--cluster-id", string(id)); err != nil {
		return err
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: ferryv1alpha1.ClusterIdentityConfigMap, Namespace: ferryv1alpha1.SystemNamespace},
		Data:       map[string]string{ferryv1alpha1.ClusterIdentityKey: string(id)},
	}
	err := c.Create(ctx, cm)
	if err == nil || !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("record cluster ID in %s/%s: %w", cm.Namespace, cm.Name, err)
		}
		return nil
	}
	have, err := ReadClusterIdentity(ctx, c)
	if err != nil {
		return err
	}
	if have != id {
		return fmt.Errorf("--cluster-id %q: this cluster's ID is already %q (ConfigMap %s/%s); it cannot change", id, have, cm.Namespace, cm.Name)
	}
	return nil
}

// ReadClusterIdentity reads this cluster's ClusterID.
func ReadClusterIdentity(ctx context.Context, c client.Reader) (ferryv1alpha1.ClusterID, error) {
	var cm corev1.ConfigMap
	key := client.ObjectKey{Namespace: ferryv1alpha1.SystemNamespace, Name: ferryv1alpha1.ClusterIdentityConfigMap}
	if err := c.Get(ctx, key, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			return "", fmt.Errorf("ferry is not set up here: no ConfigMap %s with the cluster ID (start ferry-controller-manager with --cluster-id)", key)
		}
		return "", fmt.Errorf("read cluster ID from ConfigMap %s: %w", key, err)
	}
	id := cm.Data[ferryv1alpha1.ClusterIdentityKey]
	if err := ferryv1alpha1.ValidateClusterID(fmt.Sprintf("ConfigMap %s key %s", key, ferryv1alpha1.ClusterIdentityKey), id); err != nil {
		return "", err
	}
	return ferryv1alpha1.ClusterID(id), nil
}

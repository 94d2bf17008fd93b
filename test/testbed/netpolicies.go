package testbed

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ferry-io/ferry/test/testbed/binaries"
)

// netpolUser is the identity of the real nodes' NetworkPolicy engine.
const netpolUser = "system:kube-network-policies"

// startNetworkPolicies runs the node's NetworkPolicy engine (see
// binaries.KubeNetworkPolicies), as kube-proxy runs: a process in the
// node's namespaces, with a client certificate bound to what it reads. In a
// production cluster this is the CNI's job.
func (n *RealNode) startNetworkPolicies(ctx context.Context) error {
	c := n.c
	if err := c.grantNetworkPolicyReader(ctx); err != nil {
		return err
	}
	client, err := c.ca.issue(n.path("pki"), "kube-network-policies", netpolUser, nil, false, nil, nil)
	if err != nil {
		return err
	}
	kubeconfig := n.path("kube-network-policies.kubeconfig")
	if _, err := writeKubeconfig(kubeconfig, c.Name, c.InClusterAPIServerURL, c.ca.certPEM, client); err != nil {
		return err
	}
	bin, err := binaries.Path(binaries.KubeNetworkPolicies)
	if err != nil {
		return err
	}
	iptables, err := NodeCommand("iptables")
	if err != nil {
		return err
	}
	p, err := n.run("kube-network-policies", bin, "--kubeconfig="+kubeconfig, "--hostname-override="+n.Name,
		"--pod-cidr="+n.PodCIDR.String(), "--iptables="+iptables, "--v=1")
	if err != nil {
		return err
	}
	// Ready once it queues: before, new connections are not checked.
	return n.waitFor(ctx, "the NetworkPolicy engine", time.Minute, func(context.Context) error {
		b, err := os.ReadFile(p.logPath)
		if err != nil {
			return err
		}
		if !bytes.Contains(b, []byte("Queueing the new connections")) {
			return fmt.Errorf("kube-network-policies does not queue yet")
		}
		return nil
	})
}

// grantNetworkPolicyReader lets the engine read what it decides by:
// NetworkPolicies, namespaces and pods.
func (c *Cluster) grantNetworkPolicyReader(ctx context.Context) error {
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "testbed:kube-network-policies"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{""}, Resources: []string{"namespaces", "pods"}, Verbs: []string{"list", "watch"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: netpolUser}},
	}
	if _, err := c.Kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("%s: ClusterRole %s: %w", c.Name, role.Name, err)
	}
	if _, err := c.Kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("%s: ClusterRoleBinding %s: %w", c.Name, binding.Name, err)
	}
	return nil
}

package testbed_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/ferry-io/ferry/test/testbed"
)

// TestRealNodeNetworkPolicies starts a real node with its NetworkPolicy
// engine (Options.NetworkPolicies): without a policy both clients reach
// the server; with deny-all plus allow-from-label only the labelled one
// does, the other times out; deleting the policies opens it again.
func TestRealNodeNetworkPolicies(t *testing.T) {
	testbed.RequireRealNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	start := time.Now()
	c, err := testbed.Start(ctx, testbed.Options{Name: "netpol", RealNodes: 1, NetworkPolicies: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			for _, n := range c.RealNodes {
				t.Log(n.Logs(40))
			}
		}
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	}()
	t.Logf("cluster with a real node, its NetworkPolicy engine and DNS up in %s", time.Since(start).Round(100*time.Millisecond))

	pod := func(name string, labels map[string]string) {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels},
			Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: ptr.To[int64](1),
				Containers: []corev1.Container{{
					Name: "netexec", Image: testbed.AgnhostImage, ImagePullPolicy: corev1.PullNever,
					Args: []string{"netexec", "--http-port=8080"},
				}},
			},
		}
		if err := wait(ctx, time.Minute, func() error {
			_, err := c.Kube.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
			return err
		}); err != nil {
			t.Fatalf("create pod %s: %v", name, err)
		}
	}
	pod("server", map[string]string{"app": "server"})
	pod("allowed", map[string]string{"access": "true"})
	pod("denied", nil)
	var serverIP string
	for _, name := range []string{"server", "allowed", "denied"} {
		if err := wait(ctx, 2*time.Minute, func() error {
			p, err := c.Kube.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
				return fmt.Errorf("pod %s is %s", name, p.Status.Phase)
			}
			if name == "server" {
				serverIP = p.Status.PodIP
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	connects := func(client string) bool {
		_, err := c.Exec(ctx, "default", client, "/agnhost", "connect", serverIP+":8080", "--timeout=3s")
		return err == nil
	}
	expect := func(what string, allowed, denied bool) {
		t.Helper()
		if err := wait(ctx, time.Minute, func() error {
			if a, d := connects("allowed"), connects("denied"); a != allowed || d != denied {
				return fmt.Errorf("allowed client connects: %t, denied client: %t", a, d)
			}
			return nil
		}); err != nil {
			t.Fatalf("%s: %v (want %t, %t)", what, err, allowed, denied)
		}
	}
	expect("no policy", true, true)

	policies := []*networkingv1.NetworkPolicy{{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-all", Namespace: "default"},
		Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
	}, {
		ObjectMeta: metav1.ObjectMeta{Name: "allow-access", Namespace: "default"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
				{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"access": "true"}}},
			}}},
		},
	}}
	for _, p := range policies {
		if _, err := c.Kube.NetworkingV1().NetworkPolicies("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	start = time.Now()
	expect("deny-all + allow-from-label", true, false)
	t.Logf("enforced %s after the policies were created", time.Since(start).Round(100*time.Millisecond))
	for _, p := range policies {
		if err := c.Kube.NetworkingV1().NetworkPolicies("default").Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	expect("policies deleted", true, true)
}

func wait(ctx context.Context, timeout time.Duration, f func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

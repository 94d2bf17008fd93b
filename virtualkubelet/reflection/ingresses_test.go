package reflection

import (
	"maps"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
)

func localIngress() *networkingv1.Ingress {
	return &networkingv1.Ingress{
		ObjectMeta: localObjectMeta("web"),
		Spec: networkingv1.IngressSpec{
			IngressClassName: new("nginx"),
			TLS:              []networkingv1.IngressTLS{{Hosts: []string{"shop.example.com"}, SecretName: "web-tls"}},
			Rules: []networkingv1.IngressRule{{
				Host: "shop.example.com",
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
					Paths: []networkingv1.HTTPIngressPath{{
						Path:     "/",
						PathType: new(networkingv1.PathTypePrefix),
						Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
							Name: "web", Port: networkingv1.ServiceBackendPort{Name: "http"},
						}},
					}},
				}},
			}},
		},
		Status: networkingv1.IngressStatus{LoadBalancer: networkingv1.IngressLoadBalancerStatus{
			Ingress: []networkingv1.IngressLoadBalancerIngress{{IP: "192.168.1.20"}},
		}},
	}
}

func TestIngressTranslatorDesired(t *testing.T) {
	tests := []struct {
		name string
		// classes are Env.IngressClasses; translatorEnv's when nil.
		classes    map[string]string
		class      *string // the local ingressClassName
		annotation *string // the local kubernetes.io/ingress.class
		wantClass  *string
		wantAnno   *string
	}{
		{name: "mapped class", class: new("nginx"), wantClass: new("provider-nginx")},
		{name: "other class through *", class: new("traefik"), wantClass: new("provider-default")},
		{name: "no class through *", wantClass: new("provider-default")},
		{name: "unmapped class", classes: map[string]string{"nginx": "provider-nginx"}, class: new("traefik")},
		{name: "no mapping", classes: map[string]string{}, class: new("nginx")},
		{name: "mapped to empty", classes: map[string]string{"nginx": "", "*": "provider-default"}, class: new("nginx")},
		{name: "annotation alone", annotation: new("nginx"), wantAnno: new("provider-nginx")},
		{name: "annotation alone, unmapped", classes: map[string]string{"nginx": "provider-nginx"}, annotation: new("haproxy")},
		{name: "annotation and class", class: new("nginx"), annotation: new("nginx"),
			wantClass: new("provider-nginx"), wantAnno: new("provider-nginx")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := translatorEnv()
			if tt.classes != nil {
				env.IngressClasses = tt.classes
			}
			local := localIngress()
			local.Spec.IngressClassName = tt.class
			if tt.annotation != nil {
				local.Annotations[ingressClassAnnotation] = *tt.annotation
			}
			before := local.DeepCopy()
			got, skip, err := ingressTranslator{}.desired(env, local, "shop-home")
			if err != nil || skip != "" {
				t.Fatalf("desired: %v, skip %q", err, skip)
			}
			want := got.(*networkingv1.Ingress)
			if !ptr.Equal(want.Spec.IngressClassName, tt.wantClass) {
				t.Errorf("ingressClassName = %v, want %v", ptr.Deref(want.Spec.IngressClassName, "<nil>"), ptr.Deref(tt.wantClass, "<nil>"))
			}
			anno, ok := want.Annotations[ingressClassAnnotation]
			if ok != (tt.wantAnno != nil) || ok && anno != *tt.wantAnno {
				t.Errorf("annotation %s = %q (set: %v), want %v", ingressClassAnnotation, anno, ok, ptr.Deref(tt.wantAnno, "<unset>"))
			}
			delete(want.Annotations, ingressClassAnnotation)
			checkReflectedMeta(t, want, "web", reflectedLabels(nil))
			spec := want.Spec
			spec.IngressClassName = local.Spec.IngressClassName
			if !equality.Semantic.DeepEqual(spec, local.Spec) {
				t.Errorf("spec = %+v, want the local one", want.Spec)
			}
			if !equality.Semantic.DeepEqual(want.Status, networkingv1.IngressStatus{}) {
				t.Errorf("status copied: %+v", want.Status)
			}
			if !equality.Semantic.DeepEqual(local, before) {
				t.Error("desired changed the local Ingress")
			}
		})
	}
}

func TestIngressTranslatorEqual(t *testing.T) {
	tests := []struct {
		name    string
		classes map[string]string // translatorEnv's when nil
		change  func(*networkingv1.Ingress)
		equal   bool
	}{
		{name: "as created, with the provider's status", change: func(ing *networkingv1.Ingress) {
			ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "172.16.0.4"}}
		}, equal: true},
		{name: "provider's default class", classes: map[string]string{}, change: func(ing *networkingv1.Ingress) {
			ing.Spec.IngressClassName = new("provider-default")
		}, equal: true},
		{name: "class changed", change: func(ing *networkingv1.Ingress) { ing.Spec.IngressClassName = new("other") }},
		{name: "host changed", change: func(ing *networkingv1.Ingress) { ing.Spec.Rules[0].Host = "evil.example.com" }},
		{name: "backend changed", change: func(ing *networkingv1.Ingress) {
			ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name = "other"
		}},
		{name: "TLS removed", change: func(ing *networkingv1.Ingress) { ing.Spec.TLS = nil }},
		{name: "label removed", change: func(ing *networkingv1.Ingress) { delete(ing.Labels, "app") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := translatorEnv()
			if tt.classes != nil {
				env.IngressClasses = tt.classes
			}
			want, _, err := ingressTranslator{}.desired(env, localIngress(), "shop-home")
			if err != nil {
				t.Fatal(err)
			}
			remote := want.DeepCopyObject().(*networkingv1.Ingress)
			assignIdentity(remote)
			tt.change(remote)
			if got := (ingressTranslator{}).equal(want, remote); got != tt.equal {
				t.Errorf("equal = %v, want %v", got, tt.equal)
			}
		})
	}
}

func TestIngressTranslatorMerge(t *testing.T) {
	tests := []struct {
		name      string
		classes   map[string]string
		wantClass string
	}{
		{name: "mapped class replaces the remote one", classes: map[string]string{"nginx": "provider-nginx"}, wantClass: "provider-nginx"},
		{name: "provider's default class kept", classes: map[string]string{}, wantClass: "provider-default"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := ingressTranslator{}
			env := translatorEnv()
			env.IngressClasses = tt.classes
			want, _, err := tr.desired(env, localIngress(), "shop-home")
			if err != nil {
				t.Fatal(err)
			}
			remote := want.DeepCopyObject().(*networkingv1.Ingress)
			assignIdentity(remote)
			remote.Labels = map[string]string{"stale": "x"}
			remote.Spec.IngressClassName = new("provider-default")
			remote.Spec.Rules[0].Host = "old.example.com"
			remote.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "172.16.0.4"}}
			before := remote.DeepCopy()

			merged := tr.merge(want, remote).(*networkingv1.Ingress)
			checkKeptIdentity(t, merged)
			if got := ptr.Deref(merged.Spec.IngressClassName, ""); got != tt.wantClass {
				t.Errorf("class = %q, want %q", got, tt.wantClass)
			}
			if !equality.Semantic.DeepEqual(merged.Status, remote.Status) {
				t.Error("merge dropped the provider's status")
			}
			if !maps.Equal(merged.Labels, want.GetLabels()) {
				t.Errorf("labels = %v", merged.Labels)
			}
			if !tr.equal(want, merged) {
				t.Errorf("merged copy %+v does not equal %+v", merged, want)
			}
			if !equality.Semantic.DeepEqual(remote, before) {
				t.Error("merge changed the remote object")
			}
		})
	}
}

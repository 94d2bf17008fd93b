package testbed

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// ApplyKustomization installs a kustomization folder (e.g. ferry's
// manifests/base) with `kubectl apply --server-side -k`, as ferry's README
// tells users to, and waits until every CRD of the cluster is Established and
// served by discovery: clients map kinds to resources through discovery,
// which lags the CRD a little.
func (c *Cluster) ApplyKustomization(ctx context.Context, dir string) error {
	if out, err := c.Kubectl(ctx, "apply", "--server-side", "--field-manager=ferry-testbed", "-k", dir); err != nil {
		return fmt.Errorf("apply %s:\n%s: %w", dir, out, err)
	}
	return c.waitFor(ctx, "CRDs of "+dir+" Established and discovered", 30*time.Second, c.crdsServed)
}

// crdsServed fails until every CRD is Established and listed by discovery.
func (c *Cluster) crdsServed(ctx context.Context) error {
	var crds apiextensionsv1.CustomResourceDefinitionList
	if err := c.Client.List(ctx, &crds); err != nil {
		return err
	}
	for _, crd := range crds.Items {
		if !crdEstablished(&crd) {
			return fmt.Errorf("CRD %s is not Established", crd.Name)
		}
		for _, v := range crd.Spec.Versions {
			gv := crd.Spec.Group + "/" + v.Name
			resources, err := c.Kube.Discovery().ServerResourcesForGroupVersion(gv)
			if err != nil {
				return fmt.Errorf("discovery of %s: %w", gv, err)
			}
			found := false
			for _, r := range resources.APIResources {
				found = found || r.Name == crd.Spec.Names.Plural
			}
			if !found {
				return fmt.Errorf("discovery of %s does not list %s yet", gv, crd.Spec.Names.Plural)
			}
		}
	}
	return nil
}

func crdEstablished(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, cond := range crd.Status.Conditions {
		if cond.Type == apiextensionsv1.Established {
			return cond.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}

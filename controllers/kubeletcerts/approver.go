// Package kubeletcerts approves the serving certificates of ferry's virtual
// kubelets: a CertificateSigningRequest to the kubernetes.io/kubelet-serving
// signer for a virtual node, from an identity allowed to serve that node,
// for the addresses the node advertises. kube-controller-manager then signs
// it with the cluster CA, which the API server trusts for kubelets. Requests
// for other nodes are left to whoever approves them.
package kubeletcerts

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// ReasonApproved is the reason of ferry's approvals and denials.
const (
	ReasonApproved = "FerryVirtualKubeletServing"
	ReasonDenied   = "FerryVirtualKubeletServingDenied"
	nodeUserPrefix = "system:node:"
	nodesGroup     = "system:nodes"
	// waitForNode is how soon a request is looked at again while its node
	// is not registered yet.
	waitForNode = 2 * time.Second
)

// +kubebuilder:rbac:groups=certificates.k8s.io,resources=certificatesigningrequests,verbs=get;list;watch
// +kubebuilder:rbac:groups=certificates.k8s.io,resources=certificatesigningrequests/approval,verbs=update
// +kubebuilder:rbac:groups=certificates.k8s.io,resources=signers,resourceNames=kubernetes.io/kubelet-serving,verbs=approve
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch

// Approver approves virtual kubelets' serving certificate requests.
type Approver struct {
	client.Client
}

// Reconcile decides one request.
func (a *Approver) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var csr certificatesv1.CertificateSigningRequest
	if err := a.Get(ctx, req.NamespacedName, &csr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if decided(&csr) || csr.Spec.SignerName != certificatesv1.KubeletServingSignerName {
		return ctrl.Result{}, nil
	}
	x509cr, err := parseRequest(csr.Spec.Request)
	if err != nil {
		return ctrl.Result{}, nil // not ours to judge: left to others
	}
	nodeName, ok := strings.CutPrefix(x509cr.Subject.CommonName, nodeUserPrefix)
	if !ok {
		return ctrl.Result{}, nil
	}
	vn, err := a.virtualNodeFor(ctx, nodeName)
	if err != nil || vn == nil {
		return ctrl.Result{}, err // not a virtual node: not ours
	}
	logger := log.FromContext(ctx).WithValues("node", nodeName, "requester", csr.Spec.Username)

	var node corev1.Node
	if err := a.Get(ctx, types.NamespacedName{Name: nodeName}, &node); apierrors.IsNotFound(err) {
		return ctrl.Result{RequeueAfter: waitForNode}, nil
	} else if err != nil {
		return ctrl.Result{}, err
	}
	if node.Labels[ferryv1alpha1.LabelNodeType] != ferryv1alpha1.NodeTypeVirtual {
		return ctrl.Result{}, nil
	}
	if len(node.Status.Addresses) == 0 {
		return ctrl.Result{RequeueAfter: waitForNode}, nil
	}
	if err := Validate(&csr, x509cr, &node); err != nil {
		logger.Info("Denying a serving certificate request", "csr", csr.Name, "reason", err.Error())
		return ctrl.Result{}, a.decide(ctx, &csr, false, err.Error())
	}
	allowed, err := a.mayServe(ctx, &csr, vn)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !allowed {
		msg := fmt.Sprintf("%s may not serve virtual node %s (no update on virtualnodes/status %s/%s)", csr.Spec.Username, nodeName, vn.Namespace, vn.Name)
		logger.Info("Denying a serving certificate request", "csr", csr.Name, "reason", msg)
		return ctrl.Result{}, a.decide(ctx, &csr, false, msg)
	}
	logger.Info("Approving a serving certificate request", "csr", csr.Name)
	return ctrl.Result{}, a.decide(ctx, &csr, true, fmt.Sprintf("serving certificate of virtual node %s, requested by its virtual kubelet", nodeName))
}

func decided(csr *certificatesv1.CertificateSigningRequest) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved || c.Type == certificatesv1.CertificateDenied || c.Type == certificatesv1.CertificateFailed {
			return true
		}
	}
	return false
}

func parseRequest(data []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("spec.request: not a PEM CERTIFICATE REQUEST")
	}
	cr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("spec.request: %w", err)
	}
	if err := cr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("spec.request: %w", err)
	}
	return cr, nil
}

// allowedUsages are the usages of a kubelet serving certificate.
var allowedUsages = []certificatesv1.KeyUsage{
	certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth,
}

// Validate says why a request for node's serving certificate must be
// denied, or nil: the subject is the node's, the usages a server's, and the
// names and addresses the node's own.
func Validate(csr *certificatesv1.CertificateSigningRequest, cr *x509.CertificateRequest, node *corev1.Node) error {
	var errs []error
	if !slices.Equal(cr.Subject.Organization, []string{nodesGroup}) {
		errs = append(errs, fmt.Errorf("subject organization %q: must be exactly [%s]", cr.Subject.Organization, nodesGroup))
	}
	if len(cr.EmailAddresses) > 0 || len(cr.URIs) > 0 {
		errs = append(errs, errors.New("subject alternative names: no email addresses or URIs allowed"))
	}
	if !slices.Contains(csr.Spec.Usages, certificatesv1.UsageServerAuth) {
		errs = append(errs, errors.New("spec.usages: must include server auth"))
	}
	for _, u := range csr.Spec.Usages {
		if !slices.Contains(allowedUsages, u) {
			errs = append(errs, fmt.Errorf("spec.usages: %q is not a serving usage (accepted: digital signature, key encipherment, server auth)", u))
		}
	}
	var ips []net.IP
	var names []string
	for _, a := range node.Status.Addresses {
		switch a.Type {
		case corev1.NodeHostName, corev1.NodeInternalDNS, corev1.NodeExternalDNS:
			names = append(names, a.Address)
		case corev1.NodeInternalIP, corev1.NodeExternalIP:
			if ip := net.ParseIP(a.Address); ip != nil {
				ips = append(ips, ip)
			}
		}
	}
	if len(cr.IPAddresses) == 0 && len(cr.DNSNames) == 0 {
		errs = append(errs, errors.New("subject alternative names: at least one of the node's addresses is required"))
	}
	for _, ip := range cr.IPAddresses {
		if !slices.ContainsFunc(ips, ip.Equal) {
			errs = append(errs, fmt.Errorf("IP address %s is not one of node %s's addresses", ip, node.Name))
		}
	}
	for _, n := range cr.DNSNames {
		if !slices.Contains(names, n) {
			errs = append(errs, fmt.Errorf("DNS name %q is not one of node %s's addresses", n, node.Name))
		}
	}
	return errors.Join(errs...)
}

// virtualNodeFor is the VirtualNode behind nodeName, or nil.
func (a *Approver) virtualNodeFor(ctx context.Context, nodeName string) (*ferryv1alpha1.VirtualNode, error) {
	var list ferryv1alpha1.VirtualNodeList
	if err := a.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("list virtual nodes: %w", err)
	}
	for i := range list.Items {
		if list.Items[i].Node() == nodeName {
			return &list.Items[i], nil
		}
	}
	return nil, nil
}

// mayServe asks the API server whether the requester may update the
// VirtualNode's status: only a virtual kubelet serving it (or an
// administrator) may.
func (a *Approver) mayServe(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, vn *ferryv1alpha1.VirtualNode) (bool, error) {
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range csr.Spec.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: csr.Spec.Username, Groups: csr.Spec.Groups, UID: csr.Spec.UID, Extra: extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Group: ferryv1alpha1.GroupVersion.Group, Resource: "virtualnodes", Subresource: "status",
			Verb: "update", Namespace: vn.Namespace, Name: vn.Name,
		},
	}}
	if err := a.Create(ctx, sar); err != nil {
		return false, fmt.Errorf("ask whether %s may serve %s/%s: %w", csr.Spec.Username, vn.Namespace, vn.Name, err)
	}
	return sar.Status.Allowed, nil
}

func (a *Approver) decide(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, approve bool, message string) error {
	cond := certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: ReasonApproved,
		Message: message, LastUpdateTime: metav1.Now(),
	}
	if !approve {
		cond.Type, cond.Reason = certificatesv1.CertificateDenied, ReasonDenied
	}
	csr.Status.Conditions = append(csr.Status.Conditions, cond)
	if err := a.SubResource("approval").Update(ctx, csr); err != nil {
		return fmt.Errorf("record the decision on %s: %w", csr.Name, err)
	}
	return nil
}

// SetupWithManager registers the approver for kubelet-serving requests.
func (a *Approver) SetupWithManager(mgr ctrl.Manager) error {
	kubeletServing := predicate.NewPredicateFuncs(func(o client.Object) bool {
		csr, ok := o.(*certificatesv1.CertificateSigningRequest)
		return ok && csr.Spec.SignerName == certificatesv1.KubeletServingSignerName
	})
	return ctrl.NewControllerManagedBy(mgr).Named("kubelet-serving-approver").
		For(&certificatesv1.CertificateSigningRequest{}, builder.WithPredicates(kubeletServing)).
		Complete(a)
}

// Package kubeletapi serves the kubelet API of a virtual node, so that
// kubectl logs, exec, attach, port-forward and the stats endpoints work on
// offloaded pods as on local ones: the consumer's API server calls the
// virtual kubelet as it would call a kubelet, and each call is carried to the
// pod's twin on the provider through the provider's own API server, with the
// consumer's credential there.
//
// Requests are authenticated and authorized as a kubelet does it: a client
// certificate signed by the consumer's client CA (or a bearer token, checked
// with a TokenReview), then a SubjectAccessReview on the node's proxy, log,
// stats or metrics subresource.
package kubeletapi

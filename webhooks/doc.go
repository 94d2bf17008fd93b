// Package webhooks holds ferry's admission webhooks, one file per resource
// kind, and the policy logic they apply.
package webhooks

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VolumeMoveSpec asks for the data of one claim of the ferry storage class
// to be moved to another cluster, and says what becomes of the source.
// +kubebuilder:validation:XValidation:rule="!(has(self.confirmed) && self.confirmed && has(self.revert) && self.revert)",message="confirmed and revert exclude each other"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.confirmed) || !oldSelf.confirmed || (has(self.confirmed) && self.confirmed)",message="confirmed cannot be taken back"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.revert) || !oldSelf.revert || (has(self.revert) && self.revert)",message="revert cannot be taken back"
type VolumeMoveSpec struct {
	// ClaimName is the claim to move, in the VolumeMove's namespace. Its
	// workload must be stopped: no pod may use the claim.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="claimName is immutable"
	ClaimName string `json:"claimName"`

	// TargetCluster is where the data goes: a provider's ClusterID, or this
	// cluster's own to bring the data home.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="targetCluster is immutable"
	TargetCluster ClusterID `json:"targetCluster"`

	// SourceRetention: Keep (the default) keeps the source volume, untouched,
	// once the claim points at the copy, until confirmed (then it is deleted)
	// or revert (then the claim points at it again, without copying); Delete
	// deletes it as soon as the claim points at the verified copy.
	// +kubebuilder:validation:Enum=Keep;Delete
	// +kubebuilder:default=Keep
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="sourceRetention is immutable"
	// +optional
	SourceRetention VolumeMoveRetention `json:"sourceRetention,omitempty"`

	// Confirmed accepts the moved data: the kept source volume is deleted.
	// Set before the move ends, it is applied when it ends.
	// +optional
	Confirmed bool `json:"confirmed,omitempty"`

	// Revert, before confirmed, points the claim back at the kept source
	// volume as it was before the move (nothing is copied back: what pods
	// wrote to the copy since is discarded with it). A move still copying is
	// cancelled instead.
	// +optional
	Revert bool `json:"revert,omitempty"`
}

// VolumeMoveRetention says what becomes of a move's source volume.
type VolumeMoveRetention string

const (
	// RetentionKeep keeps the source until the move is confirmed.
	RetentionKeep VolumeMoveRetention = "Keep"
	// RetentionDelete deletes the source once the claim points at the copy.
	RetentionDelete VolumeMoveRetention = "Delete"
)

// VolumeMovePhase is where a move stands.
type VolumeMovePhase string

const (
	// MovePending: accepted, not started (checks running).
	MovePending VolumeMovePhase = "Pending"
	// MoveRefused: a check failed before anything was changed; see the
	// Ready condition's reason and message.
	MoveRefused VolumeMovePhase = "Refused"
	// MoveCopying: the target claim is provisioned and the data streams.
	MoveCopying VolumeMovePhase = "Copying"
	// MoveSwitching: the copy is verified; the claim is being re-pointed.
	MoveSwitching VolumeMovePhase = "Switching"
	// MoveAwaitingConfirmation: the claim points at the copy; the source
	// is kept until confirmed or reverted.
	MoveAwaitingConfirmation VolumeMovePhase = "AwaitingConfirmation"
	// MoveSucceeded: the claim points at the copy, the source is deleted.
	MoveSucceeded VolumeMovePhase = "Succeeded"
	// MoveFailed: the copy failed (attempts exhausted) or was cancelled;
	// what was staged is removed, the claim points where it did.
	MoveFailed VolumeMovePhase = "Failed"
	// MoveReverted: the claim points at the source again, the copy is gone.
	MoveReverted VolumeMovePhase = "Reverted"
)

// Done says whether the phase is final: the move no longer holds its claim.
func (p VolumeMovePhase) Done() bool {
	return p == MoveRefused || p == MoveSucceeded || p == MoveFailed || p == MoveReverted
}

// VolumeMove condition types and reasons.
const (
	// VolumeMoveReady is True once the claim points at the moved data; its
	// reason says why not otherwise.
	VolumeMoveReady = "Ready"

	// Refusals (phase Refused; nothing changed).
	MoveReasonWorkloadRunning       = "WorkloadRunning"
	MoveReasonMoveInProgress        = "MoveInProgress"
	MoveReasonClaimNotFound         = "ClaimNotFound"
	MoveReasonClaimNotMovable       = "ClaimNotMovable"
	MoveReasonAlreadyThere          = "AlreadyThere"
	MoveReasonClassNotOffered       = "ClassNotOffered"
	MoveReasonInsufficientCapacity  = "InsufficientCapacity"
	MoveReasonTargetUnreachable     = "TargetUnreachable"
	MoveReasonNamespaceNotOffloaded = "NamespaceNotOffloaded"

	// Progress and outcomes.
	MoveReasonProvisioning = "Provisioning"
	MoveReasonCopying      = "Copying"
	MoveReasonCopyFailed   = "CopyFailed"
	MoveReasonSwitching    = "Switching"
	MoveReasonMoved        = "Moved"
	MoveReasonCancelled    = "Cancelled"
	MoveReasonReverted     = "Reverted"
)

// VolumeMoveEndpoint says where one side of a move's data is.
type VolumeMoveEndpoint struct {
	// Cluster holding the data.
	// +optional
	Cluster ClusterID `json:"cluster,omitempty"`
	// Claim holding the data there (namespace/name): in the storage
	// namespace for this cluster, in the twin namespace for a provider.
	// +optional
	Claim string `json:"claim,omitempty"`
	// Volume is this cluster's PersistentVolume standing for that claim.
	// +optional
	Volume string `json:"volume,omitempty"`
}

// VolumeMoveProgress is what the copy reports, about once a second.
type VolumeMoveProgress struct {
	// BytesCopied so far in the current attempt.
	// +optional
	BytesCopied int64 `json:"bytesCopied,omitempty"`
	// TotalBytes to copy (the source tree's file sizes).
	// +optional
	TotalBytes int64 `json:"totalBytes,omitempty"`
	// BytesPerSecond is the current rate.
	// +optional
	BytesPerSecond int64 `json:"bytesPerSecond,omitempty"`
	// EtaSeconds is the estimated time left.
	// +optional
	EtaSeconds int64 `json:"etaSeconds,omitempty"`
}

// VolumeMoveStatus is what the controller did.
type VolumeMoveStatus struct {
	// Phase of the move.
	// +optional
	Phase VolumeMovePhase `json:"phase,omitempty"`
	// Conditions: Ready.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ObservedGeneration is the spec generation last acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// ClaimUID is the UID of the claim when the move started (the claim is
	// made again under its name when re-pointed: Moved records the new one).
	// +optional
	ClaimUID string `json:"claimUID,omitempty"`
	// Source is where the data was.
	// +optional
	Source VolumeMoveEndpoint `json:"source,omitempty"`
	// Target is where the data goes.
	// +optional
	Target VolumeMoveEndpoint `json:"target,omitempty"`
	// Progress of the copy.
	// +optional
	Progress VolumeMoveProgress `json:"progress,omitempty"`
	// Attempts is how many copies were started (a copy cut by a pod's end or
	// the network starts again from an empty target, up to a bound).
	// +optional
	Attempts int32 `json:"attempts,omitempty"`
	// CopyPod is the fetch pod of the current attempt, as name/uid once
	// seen: a pod gone or made again under that name ends the attempt.
	// +optional
	CopyPod string `json:"copyPod,omitempty"`
	// Digest is the SHA-256 over the copied tree, verified on the target.
	// +optional
	Digest string `json:"digest,omitempty"`
	// Files copied.
	// +optional
	Files int64 `json:"files,omitempty"`
	// StartTime is when the copy began.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// CompletionTime is when the claim was re-pointed (or the move ended).
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
}

// VolumeMove moves the data of a claim of the ferry storage class to
// another cluster: the claim's pods must be stopped; the data is streamed
// between two short-lived pods over the network fabric, verified by
// SHA-256, then the claim is re-pointed (made again under its name, bound
// to a volume of the target) so its next pod runs where the data now is.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=vmove,categories=ferry
// +kubebuilder:printcolumn:name="Claim",type=string,JSONPath=`.spec.claimName`
// +kubebuilder:printcolumn:name="From",type=string,JSONPath=`.status.source.cluster`
// +kubebuilder:printcolumn:name="To",type=string,JSONPath=`.spec.targetCluster`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Copied",type=integer,JSONPath=`.status.progress.bytesCopied`
// +kubebuilder:printcolumn:name="Total",type=integer,JSONPath=`.status.progress.totalBytes`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type VolumeMove struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the move asked for.
	Spec VolumeMoveSpec `json:"spec"`

	// Status is where it stands.
	// +optional
	Status VolumeMoveStatus `json:"status,omitempty"`
}

// VolumeMoveList is a list of VolumeMoves.
// +kubebuilder:object:root=true
type VolumeMoveList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the VolumeMoves.
	Items []VolumeMove `json:"items"`
}

func init() {
	register(&VolumeMove{}, &VolumeMoveList{})
}

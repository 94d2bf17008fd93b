package v1alpha1

// PlacementPreference says which side a LocalAndRemote namespace's pods
// prefer while both have room.
// +kubebuilder:validation:Enum=None;LocalFirst;RemoteFirst
type PlacementPreference string

const (
	// PlacementPreferenceNone: no preference; the scheduler's own scoring
	// decides between real and virtual nodes.
	PlacementPreferenceNone PlacementPreference = "None"
	// PlacementPreferenceLocalFirst: real nodes while one fits, virtual
	// nodes only when none does; on scale-down, offloaded pods go first.
	PlacementPreferenceLocalFirst PlacementPreference = "LocalFirst"
	// PlacementPreferenceRemoteFirst: virtual nodes while one fits, real
	// nodes only when none does; on scale-down, local pods go first.
	PlacementPreferenceRemoteFirst PlacementPreference = "RemoteFirst"
)

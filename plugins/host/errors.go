package host

import "errors"

// Sentinel errors. Errors from Acquire also wrap the placement engine's
// (placement.ErrNoFit, placement.ErrTimeout, …) and the backend's
// (plugins.ErrModelNotFound, plugins.ErrOutOfMemory, …) where those apply.
var (
	ErrUnknownBackend = errors.New("no such backend")
	ErrInvalid        = errors.New("invalid backend spec")
	ErrStopped        = errors.New("plugin host stopped")
	// ErrGivenUp: the instance crashed more than [backends] max_restarts
	// times or lost its lease; release it and acquire a new one.
	ErrGivenUp = errors.New("backend given up")
	// ErrReleased: the Instance was used after its release function ran.
	ErrReleased = errors.New("instance already released")
)

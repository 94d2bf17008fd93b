// Package profile writes CPU profiles of ferry's benchmark processes.
package profile

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// StartCPU profiles this process into path until stop is called.
func StartCPU(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create CPU profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("start CPU profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}

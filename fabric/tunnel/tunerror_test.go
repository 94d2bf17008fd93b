package tunnel

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A refused /dev/net/tun names what a container needs; other errors pass
// as they are.
func TestTUNErrorSaysWhatAContainerNeeds(t *testing.T) {
	refused := tunError(fmt.Errorf("open: %w", unix.EPERM))
	if !errors.Is(refused, unix.EPERM) || !strings.Contains(refused.Error(), "c 10:200") || !strings.Contains(refused.Error(), "wireguard module") {
		t.Errorf("EPERM: %v", refused)
	}
	other := tunError(unix.EBUSY)
	if !errors.Is(other, unix.EBUSY) || strings.Contains(other.Error(), "container") {
		t.Errorf("EBUSY: %v", other)
	}
}

package disagg

import (
	"fmt"
	"testing"
)

// TestRoomStateString (BREAKER F12): every value has a name, out-of-range
// ones included, and none panics.
func TestRoomStateString(t *testing.T) {
	for s, want := range map[RoomState]string{RoomFailed: "failed", RoomBootstrapping: "bootstrapping",
		RoomPrefilling: "prefilling", RoomReady: "ready", RoomTransferring: "transferring", RoomSuccess: "success",
		RoomState(99): "RoomState(99)", RoomState(-1): "RoomState(-1)"} {
		if got := s.String(); got != want {
			t.Errorf("%d: %q, want %q", int(s), got, want)
		}
		if got := fmt.Sprintf("%v", s); got != want {
			t.Errorf("%%v of %d: %q", int(s), got)
		}
	}
}

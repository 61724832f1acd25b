package main

import (
	"testing"
	"time"

	"github.com/dsv4go/dsv4go/internal/httpserve/httpservetest"
)

// TestSlowBodyCutOff (BREAKER F29): a client trickling its request body is
// cut off after --body-read-timeout.
func TestSlowBodyCutOff(t *testing.T) {
	addr := startDecode(t, "--body-read-timeout", "300ms")
	if err := httpservetest.SlowBody(addr, "/v1/chat/completions", 5*time.Second); err != nil {
		t.Fatal(err)
	}
}

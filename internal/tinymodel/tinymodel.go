// Package tinymodel loads the embedded dsv4-tiny model for the tests of the
// packages above dsv4 (dsv4's external tests, disagg, the example servers and
// router), so that each does not repeat the same set-up. It imports testing, as
// net/http/httptest does, and is internal: users load the model with
// models.TinyDir and dsv4.Load.
package tinymodel

import (
	"context"
	"testing"

	"github.com/dsv4go/dsv4go/dsv4"
	"github.com/dsv4go/dsv4go/models"
)

// Load loads the embedded dsv4-tiny model (written once to the user cache by
// models.TinyDir) and closes it when t and its subtests end. A failure to find
// or load it fails t at once (t.Fatal).
func Load(t testing.TB) *dsv4.Model {
	t.Helper()
	dir, err := models.TinyDir()
	if err != nil {
		t.Fatal(err)
	}
	m, err := dsv4.Load(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

//go:build race

package main

// raceEnabled reports a -race build: the end-to-end test then builds the
// prefill, decode, router and co-located server binaries with -race too and
// fails on any race they report.
const raceEnabled = true

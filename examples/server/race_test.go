//go:build race

package main

// raceEnabled reports a -race build. The race detector makes the pure-Go
// forward pass many times slower (TestTinyModelTrainingTurns took 437 s and
// the 200-stream concurrency test 170 s on the 2-core box), so the tests on
// the real model send fewer requests under it; a normal run keeps the full
// counts.
const raceEnabled = true

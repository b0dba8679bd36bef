//go:build !race

package conformance

// raceEnabled reports whether the race detector is on; the overload case
// relaxes its thresholds under it (see its explanation).
const raceEnabled = false

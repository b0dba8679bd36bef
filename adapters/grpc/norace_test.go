//go:build !race

package resiliencegrpc_test

const raceEnabled = false

// Package resiliencefiber puts the inbound pipeline in front of fiber v2
// handlers.
package resiliencefiber

// Package limit holds the algorithms that move an adaptive concurrency
// limiter's limit (resilience.AdaptiveLimiter): Gradient2, the default,
// Vegas and AIMD, and the Algorithm interface to write your own. Import it
// to choose or tune an algorithm; the limiter itself, its options and its
// classifier are in package resilience.
//
// The limiter summarises the executions that finished in each sampling
// window as a Sample and hands it to Algorithm.Update, which returns the
// next limit.
package limit

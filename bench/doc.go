// Package bench holds side-by-side benchmarks of this project's inbound
// middleware and comparable middleware from other Go libraries. It is its
// own module so that core and the adapters never depend on the libraries it
// compares against. There is no non-test code here besides this comment;
// see bench_test.go and README.md for how to run and read the figures.
package bench

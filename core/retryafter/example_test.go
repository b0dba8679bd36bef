package retryafter_test

import (
	"fmt"
	"time"

	"github.com/ylcnfrht/resilience/core/retryafter"
)

func ExampleParse() {
	d, ok := retryafter.Parse("120", time.Now())
	fmt.Println(d, ok)
	// Output: 2m0s true
}

func ExampleParsePushback() {
	d, ok := retryafter.ParsePushback("250")
	fmt.Println(d, ok)
	_, ok = retryafter.ParsePushback("-1") // gRPC: do not retry
	fmt.Println(ok)
	// Output:
	// 250ms true
	// false
}

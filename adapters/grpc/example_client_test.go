package resiliencegrpc_test

import (
	"context"
	"fmt"
	"log"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	resiliencegrpc "github.com/ylcnfrht/resilience/adapters/grpc"
	"github.com/ylcnfrht/resilience/core/budget"
	"github.com/ylcnfrht/resilience/core/inbound"
	"github.com/ylcnfrht/resilience/core/throttle"
)

// A grpc-go client whose calls are retried within a retry budget and
// throttled locally while the server refuses most of them, against a
// server shedding with this adapter.
func ExampleNewClient() {
	// The server side, as in the package documentation.
	mw, err := resiliencegrpc.New(inbound.Options{})
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer()
	testpb.RegisterTestServiceServer(mw.Registrar(srv), &service{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()
	addr := ln.Addr().String()

	// The client side.
	b, _ := budget.New(budget.Options{})           // a tenth of the first attempts, plus 1 retry/s
	th, _ := throttle.New(throttle.Options[any]{}) // or the one your outbound.Transport uses
	c, err := resiliencegrpc.NewClient(resiliencegrpc.ClientOptions{Budget: b, Throttle: th})
	if err != nil {
		log.Fatal(err)
	}
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(c.UnaryInterceptor()),
		grpc.WithChainStreamInterceptor(c.StreamInterceptor()),
		grpc.WithDisableRetry(), // one retry layer, not two
	)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	_, err = testpb.NewTestServiceClient(conn).UnaryCall(context.Background(), &testpb.SimpleRequest{})
	fmt.Println("call:", status.Code(err))
	fmt.Println("first attempts in the budget:", b.Stats().FirstAttempts)
	fmt.Println("accepted by the server:", th.Stats().Accepts)
	// Output:
	// call: OK
	// first attempts in the budget: 1
	// accepted by the server: 1
}

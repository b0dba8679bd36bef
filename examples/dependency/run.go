package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// run is the whole program. It returns the exit code: 0 after a clean
// shutdown (or -h), 2 for invalid flags, 1 for any other failure. Its
// first line on stdout is "listening on http://HOST:PORT".
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("dependency", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:0", "front server address")
	latency := fs.Duration("rec-latency", time.Second, "how long the recommendations service takes to answer")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *latency < 0 {
		fmt.Fprintln(stderr, "dependency: -rec-latency must not be negative")
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))

	svc := &recommendationService{latency: *latency}
	svcLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(stderr, "dependency:", err)
		return 1
	}
	frontLn, err := net.Listen("tcp", *addr)
	if err != nil {
		svcLn.Close()
		fmt.Fprintf(stderr, "dependency: -addr: cannot listen: %v\n", err)
		return 1
	}
	base := &http.Transport{MaxIdleConnsPerHost: 64}
	defer base.CloseIdleConnections()
	cfg := defaultConfig()
	cfg.serviceURL = "http://" + svcLn.Addr().String()
	cfg.base = base
	cfg.logger = logger
	handler, err := newFront(cfg)
	if err != nil {
		svcLn.Close()
		frontLn.Close()
		fmt.Fprintln(stderr, "dependency:", err)
		return 1
	}
	url := "http://" + frontLn.Addr().String()
	fmt.Fprintf(stdout, "listening on %s\n", url)
	fmt.Fprintf(stdout, "recommendations service at %s answers in %v\n", cfg.serviceURL, *latency)
	fmt.Fprintf(stdout, "try:\n  curl %s/product/kettle\n  curl -i %s/report   # 504 after 5s; the nested call stops\n", url, url)

	errLog := log.New(stderr, "dependency: http: ", 0)
	// ReadTimeout bounds reading a whole request, body included (not the
	// handler); IdleTimeout closes keep-alive connections left idle.
	newServer := func(h http.Handler) *http.Server {
		return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
			IdleTimeout: 60 * time.Second, ErrorLog: errLog}
	}
	servers := []*http.Server{newServer(svc.handler()), newServer(handler)}
	errs := make(chan error, 2)
	go func() { errs <- servers[0].Serve(svcLn) }()
	go func() { errs <- servers[1].Serve(frontLn) }()

	code := 0
	select {
	case err := <-errs:
		fmt.Fprintln(stderr, "dependency:", err)
		code = 1
	case <-ctx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range []*http.Server{servers[1], servers[0]} {
		if err := s.Shutdown(shutCtx); err != nil {
			s.Close()
		}
	}
	for range 2 - code { // the Serve goroutines that have not reported yet
		<-errs
	}
	return code
}

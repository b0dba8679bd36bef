// Command outbound shows the client side of overload: an http.Client on
// outbound.Transport with a retry budget and an adaptive throttle, calling
// a service that sheds, beside the same client retrying naively.
//
//	go run ./examples/outbound            # budget and throttle
//	go run ./examples/outbound -naive     # the same retries, unbounded
//
// It starts an "inventory" service on loopback behind the inbound
// middleware: 4 permits, no queue, 50 ms a request, ranking marked
// retries below first attempts (by.RetriesLast): 80 calls a
// second. Then -clients callers make -calls calls each, one every
// -interval (16 × 10 a second: twice what the service can take), each
// retried up to 3 times 20 ms apart. It prints what the calls got, what
// reached the service (first attempts and marked retries), and the
// budget's and throttle's counters.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/ylcnfrht/resilience/core/inbound/by"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/budget"
	"github.com/ylcnfrht/resilience/core/inbound"
	"github.com/ylcnfrht/resilience/core/outbound"
	"github.com/ylcnfrht/resilience/core/throttle"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// service is the shedding dependency; it counts what reaches it.
type service struct {
	firsts, retries atomic.Int64
}

func (s *service) handler() (http.Handler, error) {
	mw, err := inbound.New(inbound.Options{
		Name:        "inventory",
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 4, Priority: by.RetriesLast(nil)},
	})
	if err != nil {
		return nil, err
	}
	work := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(50 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "42\n") //nolint:errcheck
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Counted before the middleware, so shed requests count too.
		if r.Header.Get(outbound.AttemptHeader) != "" {
			s.retries.Add(1)
		} else {
			s.firsts.Add(1)
		}
		work.ServeHTTP(w, r)
	}), nil
}

// client builds the calling side: with naive, a retry without budget or
// throttle; else the recommended one.
func client(base http.RoundTripper, naive bool) (*http.Client, *budget.Budget, *throttle.Throttle[*http.Response], error) {
	ro := outbound.RetryOptions()
	ro.Delay, ro.BackoffType, ro.UseJitter = 20*time.Millisecond, resilience.BackoffConstant, false
	b := resilience.NewBuilder[*http.Response](resilience.WithName("inventory"))
	var bu *budget.Budget
	var th *throttle.Throttle[*http.Response]
	if !naive {
		var err error
		// One budget and one throttle for every call to this dependency.
		if bu, err = budget.New(budget.Options{}); err != nil {
			return nil, nil, nil, err
		}
		if th, err = throttle.New(outbound.ThrottleOptions()); err != nil {
			return nil, nil, nil, err
		}
		ro.Budget = bu
	}
	b.AddRetry(ro)
	if th != nil {
		b.AddResultStrategy(th) // inside the retry: it sees every attempt
	}
	p, err := b.Build()
	if err != nil {
		return nil, nil, nil, err
	}
	tr, err := outbound.New(outbound.Options{Base: base, Pipeline: p})
	if err != nil {
		return nil, nil, nil, err
	}
	return &http.Client{Transport: tr}, bu, th, nil
}

// run is the program: 0 on success (and -h), 2 for invalid flags, 1 when
// it fails.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("outbound", flag.ContinueOnError)
	fs.SetOutput(stderr)
	naive := fs.Bool("naive", false, "retry without budget or throttle")
	clients := fs.Int("clients", 16, "callers at once")
	calls := fs.Int("calls", 25, "calls per caller")
	interval := fs.Duration("interval", 100*time.Millisecond, "time between a caller's calls")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *clients <= 0 || *calls <= 0 || *interval <= 0 {
		fmt.Fprintln(stderr, "outbound: -clients, -calls and -interval must be positive")
		return 2
	}
	svc := &service{}
	h, err := svc.handler()
	if err != nil {
		fmt.Fprintln(stderr, "outbound:", err)
		return 1
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(stderr, "outbound:", err)
		return 1
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, IdleTimeout: 30 * time.Second}
	served := make(chan struct{})
	go func() { defer close(served); srv.Serve(ln) }() //nolint:errcheck // Close ends it
	defer func() { srv.Close(); <-served }()

	base := &http.Transport{MaxIdleConnsPerHost: *clients}
	defer base.CloseIdleConnections()
	hc, bu, th, err := client(base, *naive)
	if err != nil {
		fmt.Fprintln(stderr, "outbound:", err)
		return 1
	}
	url := "http://" + ln.Addr().String() + "/stock"
	var ok, shed, throttled, failed atomic.Int64
	var wg sync.WaitGroup
	for c := range *clients {
		wg.Go(func() {
			// Callers keep their pace whatever the answers, as the
			// clients of a service do: spread over the interval, then one
			// call per tick.
			time.Sleep(*interval * time.Duration(c) / time.Duration(*clients))
			tick := time.NewTicker(*interval)
			defer tick.Stop()
			var calling sync.WaitGroup
			defer calling.Wait()
			for range *calls {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				calling.Go(func() { call(ctx, hc, url, &ok, &shed, &throttled, &failed) })
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "outbound: interrupted")
		return 1
	}
	mode := "budget and throttle"
	if *naive {
		mode = "naive retries"
	}
	total := *clients * *calls
	f, r := svc.firsts.Load(), svc.retries.Load()
	fmt.Fprintf(stdout, "%s: %d calls: %d succeeded, %d shed by the service, %d throttled locally, %d failed\n",
		mode, total, ok.Load(), shed.Load(), throttled.Load(), failed.Load())
	fmt.Fprintf(stdout, "reached the service: %d first attempts, %d marked retries (%s attempts per call)\n",
		f, r, strconv.FormatFloat(float64(f+r)/float64(total), 'f', 2, 64))
	if bu != nil {
		s := bu.Stats()
		fmt.Fprintf(stdout, "budget: %d retries allowed, %d denied\n", s.Allowed, s.Denied)
	}
	if th != nil {
		s := th.Stats()
		fmt.Fprintf(stdout, "throttle: %d requests, %d accepted, rejection probability now %.2f\n", s.Requests, s.Accepts, s.Probability)
	}
	return 0
}

// call makes one call and counts its outcome.
func call(ctx context.Context, hc *http.Client, url string, ok, shed, throttled, failed *atomic.Int64) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := hc.Do(req)
	switch {
	case errors.Is(err, throttle.ErrThrottled):
		throttled.Add(1)
	case err != nil:
		failed.Add(1)
	default:
		io.Copy(io.Discard, resp.Body) //nolint:errcheck
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			ok.Add(1)
		} else {
			shed.Add(1)
		}
	}
}

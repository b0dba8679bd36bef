package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/ylcnfrht/resilience/core/inbound/by"
	"io"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	resiliencegrpc "github.com/ylcnfrht/resilience/adapters/grpc"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
	"github.com/ylcnfrht/resilience/examples/overload/lab"
)

// -protocol grpc drives the scenario over gRPC instead of HTTP: the slot
// service is a grpc-go server behind the gRPC adapter (registered through
// its Registrar) on a loopback port, and the load is grpc-go unary calls
// from a few client connections, each with the client timeout as its
// deadline (grpc-timeout). A call answered OK is goodput; UNAVAILABLE and
// RESOURCE_EXHAUSTED are shed; DEADLINE_EXCEEDED (the client's deadline,
// or the adapter's timeout answered on time) is a timeout. Unlike the HTTP lab, the service runs in this process,
// beside the generator. The overload scenario's slot service only, one
// class of calls, without -steps or -retry-once.

const grpcConns = 8

// grpcMode builds the adapter's options for a mode, as lab.Ours does for
// HTTP; ok is false for none (no middleware).
func grpcMode(name string, k lab.Knobs) (opts inbound.Options, ok bool, err error) {
	var prio func(context.Context) int
	if k.Prioritized {
		if prio, err = by.Priority(by.PriorityHeader{Name: lab.PriorityHeader, Min: lab.HighPriority, Max: lab.LowPriority, Default: lab.LowPriority}); err != nil {
			return opts, false, err
		}
	}
	fixed := func(codel *resilience.CoDelOptions, overflow resilience.OverflowPolicy) *resilience.ConcurrencyLimiterOptions {
		return &resilience.ConcurrencyLimiterOptions{PermitLimit: k.Limit, QueueLimit: k.Queue, QueueTimeout: k.QueueTimeout, Priority: prio, CoDel: codel, Overflow: overflow}
	}
	opts = inbound.Options{Name: "lab", Timeout: k.Timeout}
	switch name {
	case "none":
		return opts, false, nil
	case "fixed":
		opts.Concurrency = fixed(nil, "")
	case "fixed-codel":
		opts.Concurrency = fixed(&resilience.CoDelOptions{}, "")
	case "fixed-droplow":
		opts.Concurrency = fixed(nil, resilience.OverflowDropLowestPriority)
	case "adaptive":
		opts.Adaptive = &resilience.AdaptiveLimiterOptions{Priority: prio}
	case "adaptive-codel":
		opts.Adaptive = &resilience.AdaptiveLimiterOptions{QueueLimit: k.Queue, QueueTimeout: k.QueueTimeout, Priority: prio, CoDel: &resilience.CoDelOptions{}}
	default:
		return opts, false, fmt.Errorf("unknown mode %q", name)
	}
	return opts, true, nil
}

// slotService holds one of its slots for the service time per call and
// keeps working when its caller has gone, like the HTTP lab's slot pool.
type slotService struct {
	slots            chan struct{}
	d                time.Duration
	stop             chan struct{}
	finished, wasted atomic.Int64
}

type slotServer interface{}

func (s *slotService) do(ctx context.Context) error {
	select {
	case s.slots <- struct{}{}:
	case <-s.stop:
		return status.Error(codes.Unavailable, "stopped")
	}
	t := time.NewTimer(s.d)
	select {
	case <-t.C:
	case <-s.stop:
		t.Stop()
	}
	<-s.slots
	s.finished.Add(1)
	if ctx.Err() != nil {
		s.wasted.Add(1)
	}
	return nil
}

const grpcWorkMethod = "/lab.Slots/Work"

func (s *slotService) desc() *grpc.ServiceDesc {
	return &grpc.ServiceDesc{ServiceName: "lab.Slots", HandlerType: (*slotServer)(nil), Methods: []grpc.MethodDesc{{MethodName: "Work",
		Handler: func(_ any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := new(emptypb.Empty)
			if err := dec(in); err != nil {
				return nil, err
			}
			h := func(ctx context.Context, _ any) (any, error) { return &emptypb.Empty{}, s.do(ctx) }
			if interceptor == nil {
				return h(ctx, in)
			}
			return interceptor(ctx, in, &grpc.UnaryServerInfo{FullMethod: grpcWorkMethod}, h)
		}}}}
}

// grpcResult is one mode's outcome.
type grpcResult struct {
	mode                             string
	sent, ok, shed, timeouts, failed int
	goodput                          float64
	p50, p99, shedP99, lagP99        time.Duration
	wasted                           int64
}

func runGRPC(ctx context.Context, o options, stdout, progress io.Writer) error {
	cfg := o.cfg
	if cfg.Service != lab.ServiceSlots || len(cfg.Steps) > 0 || cfg.RetryOnce || cfg.High > 0 {
		return errors.New("-protocol grpc: the overload scenario's slot service only, without -steps, -retry-once or -high")
	}
	capacity := float64(cfg.Slots) / cfg.ServiceTime.Seconds()
	fmt.Fprintf(stdout, "scenario %s over gRPC: %.0f req/s offered for %v against %d slots × %v (capacity %.0f req/s), client timeout %v\n",
		cfg.Scenario, cfg.Rate, cfg.Duration, cfg.Slots, cfg.ServiceTime, capacity, cfg.ClientTimeout)
	var results []grpcResult
	for _, c := range o.modes {
		r, err := runGRPCMode(ctx, cfg, c.Name, progress)
		if err != nil {
			return fmt.Errorf("%s: %w", c.Name, err)
		}
		results = append(results, r)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tsent\tok\tshed\ttimeouts\tfailed\tgoodput/s\t% of capacity\tok p50 ms\tok p99 ms\tshed p99 ms\twasted\tgen lag p99 ms\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%d\t%.1f\t\n", r.mode, r.sent, r.ok, r.shed, r.timeouts, r.failed,
			r.goodput, 100*r.goodput/capacity, msf(r.p50), msf(r.p99), msf(r.shedP99), r.wasted, msf(r.lagP99))
	}
	return tw.Flush()
}

func msf(d time.Duration) float64 { return float64(d) / 1e6 }

func runGRPCMode(ctx context.Context, cfg lab.Config, mode string, progress io.Writer) (grpcResult, error) {
	res := grpcResult{mode: mode}
	opts, shed, err := grpcMode(mode, cfg.Knobs)
	if err != nil {
		return res, err
	}
	svc := &slotService{slots: make(chan struct{}, cfg.Slots), d: cfg.ServiceTime, stop: make(chan struct{})}
	s := grpc.NewServer()
	if shed {
		mw, err := resiliencegrpc.New(opts)
		if err != nil {
			return res, err
		}
		mw.Registrar(s).RegisterService(svc.desc(), nil)
	} else {
		s.RegisterService(svc.desc(), nil)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return res, err
	}
	go func() { _ = s.Serve(ln) }()
	defer func() { close(svc.stop); s.Stop() }()
	var conns []*grpc.ClientConn
	for range grpcConns {
		cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return res, err
		}
		defer cc.Close()
		conns = append(conns, cc)
	}

	n := int(cfg.Rate * cfg.Duration.Seconds())
	interval := time.Duration(float64(time.Second) / cfg.Rate)
	type rec struct {
		kind int // 1 ok, 2 shed, 3 timeout, 4 failed
		lat  time.Duration
	}
	recs := make([]rec, n)
	lags := make([]time.Duration, n)
	var sent, okN, shedN, toN atomic.Int64
	start := time.Now()
	stopProgress := make(chan struct{})
	var pw sync.WaitGroup
	if progress != nil {
		pw.Go(func() {
			tick := time.NewTicker(500 * time.Millisecond)
			defer tick.Stop()
			for {
				line := fmt.Sprintf("\r%-16s %5.1fs  sent %6d  ok %6d  shed %6d  timed out %6d ", "grpc "+mode, time.Since(start).Seconds(), sent.Load(), okN.Load(), shedN.Load(), toN.Load())
				select {
				case <-tick.C:
					fmt.Fprint(progress, line)
				case <-stopProgress:
					fmt.Fprintln(progress, line)
					return
				}
			}
		})
	}
	var wg sync.WaitGroup
	for i := range n {
		at := start.Add(time.Duration(i) * interval)
		if d := time.Until(at); d > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
		}
		if ctx.Err() != nil {
			break
		}
		lags[i] = time.Since(at)
		cc := conns[i%len(conns)]
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, cfg.ClientTimeout)
			defer cancel()
			sent.Add(1)
			t0 := time.Now()
			err := cc.Invoke(cctx, grpcWorkMethod, &emptypb.Empty{}, new(emptypb.Empty))
			r := rec{lat: time.Since(t0)}
			switch code := status.Code(err); {
			case err == nil:
				r.kind = 1
				okN.Add(1)
			case code == codes.Unavailable || code == codes.ResourceExhausted:
				r.kind = 2
				shedN.Add(1)
			case code == codes.DeadlineExceeded: // the client's deadline, or the server's answer to it

				r.kind = 3
				toN.Add(1)
			default:
				r.kind = 4
			}
			recs[i] = r
		})
	}
	wg.Wait()
	close(stopProgress)
	pw.Wait()
	if err := ctx.Err(); err != nil {
		return res, err
	}
	var okLat, shedLat []time.Duration
	for _, r := range recs {
		switch r.kind {
		case 1:
			res.ok++
			okLat = append(okLat, r.lat)
		case 2:
			res.shed++
			shedLat = append(shedLat, r.lat)
		case 3:
			res.timeouts++
		case 4:
			res.failed++
		default:
			continue
		}
		res.sent++
	}
	res.goodput = float64(res.ok) / cfg.Duration.Seconds()
	res.p50, res.p99 = pct(okLat, 0.5), pct(okLat, 0.99)
	res.shedP99 = pct(shedLat, 0.99)
	res.lagP99 = pct(lags, 0.99)
	res.wasted = svc.wasted.Load()
	return res, nil
}

func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[min(len(d)-1, int(p*float64(len(d))))]
}

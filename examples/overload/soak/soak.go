// Package soak is the overload lab's soak: minutes of 10 × overload with
// abusive clients against a chi + CoDel server it starts as a child
// process on loopback, reporting every few seconds what the clients got
// and what the server's process holds.
//
//	go run ./examples/overload -scenario soak                  # 10 minutes
//	go run ./examples/overload -scenario soak -duration 2m -overload 4
//
// The server is a slot service (100 slots × 200 ms: 500 req/s) behind
// chi's Recoverer and the chi adapter with the fixed limiter and CoDel
// (limit 100, queue 100, queue timeout 500 ms, timeout 1 s). The clients
// offer -overload × 500 req/s (or -rate), open loop, with this fault mix:
// 10 % of the requests make their handler panic; 10 % are cancelled by
// their client before the client timeout; 10 % travel over h2c; 2 % carry
// a 100 KB header; 2 % are sent on a connection whose write side the
// client then shuts (half-closed); and 100 slowloris connections trickle a
// header line every 2 s until the server's ReadHeaderTimeout closes them.
//
// Each row gives the requests sent and the goodput per second (200s, and
// their share of capacity), the status shares of the answers, the answers
// missing (a client's error or timeout, not its own cancel; half-closed
// requests without an answer apart, in hc-no: net/http cancels a request
// whose client half-closes, and the middleware sends nothing to a client
// that left), the arrivals a late generator skipped, and the server's
// RSS, heap in use (runtime/metrics), goroutines, file descriptors and the
// 99th percentile of its goroutines' scheduling latency (sch ms: a server
// starved of CPU shows it there), and the same for the soak's own process
// (gen ms: a starved generator sends late and reads its answers late). The summary gives the memory at 1, 5 and 10 minutes, the
// missing answers by kind of client, and a verdict line; the exit code is
// 1 when the verdict is not "held". It is not part of CI: its test runs
// it for a few seconds.
package soak

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Config is one soak.
type Config struct {
	Duration      time.Duration
	Interval      time.Duration // between report rows
	Rate          float64       // offered requests per second
	ClientTimeout time.Duration
	Seed          int64
	// Shares of the requests (0 to 1). Panic and Cancel apply to any kind;
	// H2C, Large and HalfClosed are kinds of client and add up to at most 1.
	Panic, Cancel, H2C, Large, HalfClosed float64
	LargeHeader                           int // bytes of the large header
	Slowloris                             int // slow connections kept open
	LorisEvery                            time.Duration
	Server                                serverConfig
}

// capacity is the slot service's requests per second.
func (c *Config) capacity() float64 {
	return float64(c.Server.Slots) / c.Server.ServiceTime.Seconds()
}

func defaults() Config {
	return Config{
		Duration: 10 * time.Minute, Interval: 5 * time.Second, ClientTimeout: 2 * time.Second, Seed: 1,
		Panic: 0.10, Cancel: 0.10, H2C: 0.10, Large: 0.02, HalfClosed: 0.02,
		LargeHeader: 100 << 10, Slowloris: 100, LorisEvery: 2 * time.Second,
		Server: serverConfig{Slots: 100, ServiceTime: 200 * time.Millisecond, Limit: 100, Queue: 100,
			QueueTimeout: 500 * time.Millisecond, Timeout: time.Second, HeaderWait: 10 * time.Second},
	}
}

// Asked reports whether the command line asks for the soak
// (-scenario soak or -scenario=soak).
func Asked(args []string) bool {
	for i, a := range args {
		a = strings.TrimLeft(a, "-")
		if a == "scenario=soak" || (a == "scenario" && i+1 < len(args) && args[i+1] == "soak") {
			return true
		}
	}
	return false
}

func parse(args []string, stderr io.Writer) (Config, error) {
	c := defaults()
	fs := flag.NewFlagSet("overload -scenario soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.String("scenario", "soak", "soak (this program); the lab's other scenarios take the lab's flags")
	overload := fs.Float64("overload", 10, "offered load as a multiple of the service's capacity (500 req/s)")
	fs.Float64Var(&c.Rate, "rate", 0, "offered requests per second (overrides -overload)")
	fs.DurationVar(&c.Duration, "duration", c.Duration, "how long the load lasts")
	fs.DurationVar(&c.Interval, "interval", c.Interval, "time between report rows")
	fs.DurationVar(&c.ClientTimeout, "client-timeout", c.ClientTimeout, "how long a client waits for its answer")
	fs.Int64Var(&c.Seed, "seed", c.Seed, "seed of the fault mix")
	fs.Float64Var(&c.Panic, "panic", c.Panic, "share of requests whose handler panics")
	fs.Float64Var(&c.Cancel, "cancel", c.Cancel, "share of requests cancelled by their client")
	fs.Float64Var(&c.H2C, "h2c", c.H2C, "share of requests over h2c")
	fs.Float64Var(&c.Large, "large", c.Large, "share of requests with a large header")
	fs.Float64Var(&c.HalfClosed, "half-closed", c.HalfClosed, "share of requests on a half-closed connection")
	fs.IntVar(&c.LargeHeader, "large-header", c.LargeHeader, "bytes of the large header")
	fs.IntVar(&c.Slowloris, "slowloris", c.Slowloris, "slowloris connections kept open")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q: this program takes flags only", fs.Arg(0))
	}
	if c.Rate <= 0 {
		c.Rate = *overload * c.capacity()
	}
	for _, s := range []float64{c.Panic, c.Cancel, c.H2C, c.Large, c.HalfClosed} {
		if s < 0 || s > 1 {
			return c, errors.New("a share must be between 0 and 1")
		}
	}
	if c.H2C+c.Large+c.HalfClosed > 1 {
		return c, errors.New("-h2c, -large and -half-closed add up to more than 1")
	}
	if c.Duration <= 0 || c.Interval <= 0 || c.ClientTimeout <= 0 || c.Rate <= 0 {
		return c, errors.New("-duration, -interval, -client-timeout and the rate must be positive")
	}
	return c, nil
}

// Run is the soak's command: 0 when the verdict is "held", 1 when it is
// not or the soak failed, 2 for invalid flags.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parse(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "soak:", err)
		return 2
	}
	srv, err := startServer(cfg.Server)
	if err != nil {
		fmt.Fprintln(stderr, "soak: server:", err)
		return 1
	}
	defer srv.stop()
	rep, err := soak(ctx, &cfg, srv.addr, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "soak:", err)
		return 1
	}
	if !rep.held {
		if tail := srv.stderrTail(); tail != "" && srv.exited() {
			fmt.Fprintf(stderr, "soak: the server exited; its last output:\n%s\n", tail)
		}
		return 1
	}
	return 0
}

// child is the server process.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addr  string
	tail  *tailBuffer
	done  chan struct{}
}

func startServer(sc serverConfig) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	spec, _ := json.Marshal(sc)
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
	tail := &tailBuffer{max: 8 << 10}
	cmd.Stderr = tail // chi's Recoverer prints a stack per panic
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, stdin: stdin, tail: tail, done: make(chan struct{})}
	line, err := bufio.NewReader(out).ReadString('\n')
	if addr, ok := strings.CutPrefix(strings.TrimSpace(line), "addr: "); ok && err == nil {
		c.addr = addr
		go func() { cmd.Wait(); close(c.done) }() //nolint:errcheck // exited() says
		return c, nil
	}
	stdin.Close()
	cmd.Wait() //nolint:errcheck
	return nil, fmt.Errorf("child said %q (%v); stderr: %s", strings.TrimSpace(line), err, tail.String())
}

func (c *child) stop() {
	c.stdin.Close()
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
		c.cmd.Process.Kill() //nolint:errcheck
		<-c.done
	}
}

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func (c *child) stderrTail() string { return c.tail.String() }

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

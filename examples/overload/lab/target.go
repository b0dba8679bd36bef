package lab

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"time"
)

// target is a running service behind a contender's middleware.
type target struct {
	base     string
	stats    func() (serviceStats, error)
	setSlots func(n int) // nil when the service has no slots
	close    func()
}

// serve mounts the service behind mw next to the stats route and serves it
// on a fresh loopback port.
func serve(svc *service, mw func(http.Handler) http.Handler) (base string, closeFn func(), err error) {
	mux := http.NewServeMux()
	mux.Handle(workPath, mw(svc))
	mux.Handle(statsPath, svc.statsHandler())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		IdleTimeout: 60 * time.Second, ErrorLog: discardLog}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }() //nolint:errcheck // Close ends it
	return "http://" + ln.Addr().String(), func() {
		svc.close()
		srv.Close()
		<-done
	}, nil
}

// startSlots runs the slot pool in a child process, like the CPU-bound
// service: the load generator then has this process's scheduler to itself,
// whatever the middleware under test costs.
func startSlots(cfg *Config, c Contender, k Knobs) (*target, error) {
	ch, err := startChild(childSpec{Contender: c.Name, Knobs: k, Service: ServiceSlots, Slots: cfg.Slots, ServiceTime: cfg.ServiceTime, Procs: cfg.ServiceProcs, CPUs: cfg.serviceCPUs})
	if err != nil {
		return nil, err
	}
	client := &http.Client{}
	return &target{
		base:     ch.hello.Addr,
		stats:    func() (serviceStats, error) { return fetchStats(client, ch.hello.Addr) },
		setSlots: func(n int) { ch.send(fmt.Sprintf("slots %d", n)) },
		close:    ch.stop,
	}, nil
}

// childEnv names the environment variable that turns the binary into the
// service of one run.
const childEnv = "OVERLOAD_LAB_CHILD"

// childSpec is what the parent tells the child.
type childSpec struct {
	Contender   string        `json:"contender"`
	Knobs       Knobs         `json:"knobs"`
	Service     string        `json:"service"`
	Slots       int           `json:"slots"`
	ServiceTime time.Duration `json:"serviceTime"`
	CPUWork     time.Duration `json:"cpuWork"`
	Rounds      int           `json:"rounds"` // cpu: 0 means calibrate
	Procs       int           `json:"-"`      // GOMAXPROCS of the child; 0: the default
	CPUs        []int         `json:"-"`      // the child's CPUs; nil: this process's
}

// childHello is the child's first line on stdout.
type childHello struct {
	Addr     string  `json:"addr"`
	Rounds   int     `json:"rounds"`
	Capacity float64 `json:"capacity"` // measured when it calibrated; else 0
	Procs    int     `json:"procs"`    // its GOMAXPROCS
	Err      string  `json:"err,omitempty"`
}

// ServeChildIfAsked turns this process into the service of one run when
// the lab started it as such, and then exits; otherwise it returns at
// once.
// Call it first thing in main (and in TestMain) with the contenders the
// program may run.
func ServeChildIfAsked(contenders []Contender) {
	spec := os.Getenv(childEnv)
	if spec == "" {
		return
	}
	os.Exit(serveChild(spec, contenders, os.Stdin, os.Stdout))
}

func serveChild(specJSON string, contenders []Contender, stdin io.Reader, stdout io.Writer) int {
	hello := func(h childHello) { b, _ := json.Marshal(h); fmt.Fprintf(stdout, "%s\n", b) }
	var spec childSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		hello(childHello{Err: "bad spec: " + err.Error()})
		return 2
	}
	c := &PassThrough
	for i := range contenders {
		if contenders[i].Name == spec.Contender {
			c = &contenders[i]
		}
	}
	if c.Name != spec.Contender {
		hello(childHello{Err: "unknown contender " + spec.Contender})
		return 2
	}
	mw, err := c.New(spec.Knobs)
	if err != nil {
		hello(childHello{Err: err.Error()})
		return 2
	}
	var (
		h    childHello
		svc  *service
		pool *slotPool
	)
	if spec.Service == ServiceSlots {
		pool = newSlotPool(spec.Slots)
		svc = newService(slotWork(pool, spec.ServiceTime))
	} else {
		h.Rounds = spec.Rounds
		if h.Rounds == 0 {
			h.Rounds, h.Capacity = calibrate(spec.CPUWork)
		}
		svc = newService(cpuWork(h.Rounds))
	}
	base, closeFn, err := serve(svc, mw)
	if err != nil {
		hello(childHello{Err: err.Error()})
		return 1
	}
	h.Addr, h.Procs = base, runtime.GOMAXPROCS(0)
	hello(h)
	// The parent's commands, one a line: "slots N" resizes the pool. It
	// closes stdin (or dies) to end the child.
	sc := bufio.NewScanner(stdin)
	for sc.Scan() {
		var n int
		if _, err := fmt.Sscanf(sc.Text(), "slots %d", &n); err == nil && pool != nil && n > 0 {
			pool.resize(n)
		}
	}
	closeFn()
	return 0
}

// child is a started service process: its hello and how to talk to it.
type child struct {
	hello childHello
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

func startChild(spec childSpec) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	specJSON, _ := json.Marshal(spec)
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childEnv+"="+string(specJSON))
	if spec.Procs > 0 {
		cmd.Env = append(cmd.Env, fmt.Sprintf("GOMAXPROCS=%d", spec.Procs))
	}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := startOn(cmd, spec.CPUs); err != nil {
		return nil, err
	}
	ch := &child{cmd: cmd, stdin: stdin}
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- s
		io.Copy(io.Discard, stdout) //nolint:errcheck
	}()
	select {
	case s := <-line:
		if err := json.Unmarshal([]byte(s), &ch.hello); err != nil {
			ch.stop()
			return nil, fmt.Errorf("service process: no start line (is ServeChildIfAsked called first in main?): %q", s)
		}
	case <-time.After(30 * time.Second):
		ch.stop()
		return nil, errors.New("service process: did not start within 30 s")
	}
	if ch.hello.Err != "" {
		ch.stop()
		return nil, errors.New("service process: " + ch.hello.Err)
	}
	return ch, nil
}

// send writes one command line to the child.
func (c *child) send(line string) { io.WriteString(c.stdin, line+"\n") } //nolint:errcheck // a dead child is seen at stop

func (c *child) stop() {
	c.stdin.Close()
	done := make(chan struct{})
	go func() { c.cmd.Wait(); close(done) }() //nolint:errcheck
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		c.cmd.Process.Kill() //nolint:errcheck
		<-done
	}
}

// fetchStats reads the service counters over HTTP (the child's).
func fetchStats(client *http.Client, base string) (serviceStats, error) {
	// A saturated CPU-bound child schedules this request behind every
	// runnable handler: give it time.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+statsPath, nil)
	resp, err := client.Do(req)
	if err != nil {
		return serviceStats{}, err
	}
	defer resp.Body.Close()
	var s serviceStats
	return s, json.NewDecoder(resp.Body).Decode(&s)
}

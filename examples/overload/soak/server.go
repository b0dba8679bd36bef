package soak

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	resiliencechi "github.com/ylcnfrht/resilience/adapters/chi"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// childEnv carries the server's settings to the child process; its
// presence makes the process the soak's server.
const childEnv = "RESILIENCE_SOAK_SERVER"

const (
	workPath  = "/work"
	statsPath = "/_soak/stats"
	// panicHeader asks the handler to panic: the client knows which of its
	// requests should come back as a 500 from the recoverer.
	panicHeader = "X-Soak-Panic"
)

// serverConfig is what the child serves: the slot service and the
// limiter in front of it.
type serverConfig struct {
	Slots        int           `json:"slots"`
	ServiceTime  time.Duration `json:"serviceTime"`
	Limit        int           `json:"limit"`
	Queue        int           `json:"queue"`
	QueueTimeout time.Duration `json:"queueTimeout"`
	Timeout      time.Duration `json:"timeout"`
	HeaderWait   time.Duration `json:"headerWait"` // http.Server.ReadHeaderTimeout
}

// serverStats is the child's view of itself, polled by the soak.
type serverStats struct {
	RSS        int64 `json:"rss"`       // resident set, bytes (0 where /proc is missing)
	HeapInUse  int64 `json:"heapInUse"` // heap spans in use, bytes
	Goroutines int64 `json:"goroutines"`
	FDs        int64 `json:"fds"` // open file descriptors (-1 where /proc is missing)
	Panics     int64 `json:"panics"`
	Finished   int64 `json:"finished"`
	// SchedP99 is the 99th percentile of the time goroutines waited to run
	// once runnable, since the previous poll, in milliseconds: a process
	// starved of CPU shows it here first.
	SchedP99 float64 `json:"schedP99"`
}

// ServeChildIfAsked makes this process the soak's server when the soak
// started it as such, and exits when the soak closes its stdin; otherwise
// it returns at once. Call it first thing in main (and in TestMain).
func ServeChildIfAsked() {
	spec := os.Getenv(childEnv)
	if spec == "" {
		return
	}
	os.Exit(serveChild(spec, os.Stdin, os.Stdout))
}

func serveChild(spec string, stdin io.Reader, stdout io.Writer) int {
	var cfg serverConfig
	if err := json.Unmarshal([]byte(spec), &cfg); err != nil {
		fmt.Fprintln(stdout, "error: bad spec:", err)
		return 2
	}
	h, err := newServer(cfg)
	if err != nil {
		fmt.Fprintln(stdout, "error:", err)
		return 2
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(stdout, "error:", err)
		return 1
	}
	srv := newHTTPServer(h, cfg)
	go srv.Serve(ln) //nolint:errcheck // ends with the process
	fmt.Fprintln(stdout, "addr:", ln.Addr().String())
	io.Copy(io.Discard, stdin) //nolint:errcheck // EOF: the soak is over or gone
	return 0
}

func newHTTPServer(h http.Handler, cfg serverConfig) *http.Server {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true) // h2c clients, prior knowledge
	return &http.Server{
		Handler:           h,
		Protocols:         &p,
		ReadHeaderTimeout: cfg.HeaderWait,
		ReadTimeout:       30 * time.Second, // the whole request, body included (not the handler)
		IdleTimeout:       time.Minute,
	}
}

// server is the soak's service: chi's Recoverer outermost (so a panic
// becomes a 500 after the shedding middleware has returned its permit),
// the stats outside the shedding, the work behind chi + CoDel.
type server struct {
	slots    chan struct{}
	svcTime  time.Duration
	panics   atomic.Int64
	finished atomic.Int64

	sched schedTracker
}

func newServer(cfg serverConfig) (http.Handler, error) {
	mw, err := resiliencechi.New(inbound.Options{
		Name:    "soak",
		Timeout: cfg.Timeout,
		Concurrency: &resilience.ConcurrencyLimiterOptions{
			PermitLimit:  cfg.Limit,
			QueueLimit:   cfg.Queue,
			QueueTimeout: cfg.QueueTimeout,
			CoDel:        &resilience.CoDelOptions{},
		},
	})
	if err != nil {
		return nil, err
	}
	s := &server{slots: make(chan struct{}, cfg.Slots), svcTime: cfg.ServiceTime}
	r := chi.NewRouter()
	r.Use(middleware.Recoverer)
	r.Get(statsPath, s.stats)
	r.Group(func(r chi.Router) {
		r.Use(mw.Handler)
		r.Get(workPath, s.work)
	})
	return r, nil
}

// work holds a slot for the service time, like a call to a dependency
// that does not stop when its client leaves.
func (s *server) work(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(panicHeader) != "" {
		s.panics.Add(1)
		panic("soak: a handler's bug")
	}
	s.slots <- struct{}{}
	time.Sleep(s.svcTime)
	<-s.slots
	s.finished.Add(1)
	w.Header().Set("Content-Type", "text/plain")
	io.WriteString(w, "ok\n") //nolint:errcheck
}

func (s *server) stats(w http.ResponseWriter, _ *http.Request) {
	st := readStats()
	st.Panics, st.Finished = s.panics.Load(), s.finished.Load()
	st.SchedP99 = s.schedP99()
	b, _ := json.Marshal(st)
	w.Header().Set("Content-Type", "application/json")
	w.Write(b) //nolint:errcheck
}

func (s *server) schedP99() float64 { return s.sched.p99() }

// schedTracker gives the 99th percentile of this process's scheduling
// latency (/sched/latencies:seconds) over the counts added since its
// previous call, in milliseconds.
type schedTracker struct {
	mu   sync.Mutex
	last []uint64
}

func (t *schedTracker) p99() float64 {
	sample := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindFloat64Histogram {
		return 0
	}
	h := sample[0].Value.Float64Histogram()
	t.mu.Lock()
	defer t.mu.Unlock()
	delta := make([]uint64, len(h.Counts))
	var total uint64
	for i, c := range h.Counts {
		if i < len(t.last) {
			c -= t.last[i]
		}
		delta[i] = c
		total += c
	}
	t.last = append(t.last[:0], h.Counts...)
	if total == 0 {
		return 0
	}
	want := total - total/100
	var seen uint64
	for i, c := range delta {
		seen += c
		if seen >= want {
			return h.Buckets[i+1] * 1000 // the bucket's upper bound
		}
	}
	return 0
}

var statSamples = []metrics.Sample{
	{Name: "/memory/classes/heap/objects:bytes"},
	{Name: "/memory/classes/heap/unused:bytes"},
	{Name: "/sched/goroutines:goroutines"},
}

// readStats reads the process's memory, goroutines and descriptors.
func readStats() serverStats {
	s := make([]metrics.Sample, len(statSamples))
	copy(s, statSamples)
	metrics.Read(s)
	st := serverStats{
		HeapInUse:  int64(s[0].Value.Uint64() + s[1].Value.Uint64()),
		Goroutines: int64(s[2].Value.Uint64()),
		RSS:        rss(),
		FDs:        -1,
	}
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		st.FDs = int64(len(ents))
	}
	return st
}

// rss is the resident set from /proc/self/status (VmRSS), 0 elsewhere.
func rss() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

package lab

import (
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// statsPath serves the service's counters, outside the middleware.
const (
	workPath  = "/work"
	statsPath = "/_lab/stats"
)

// serviceStats are the service's counters at the end of a run.
type serviceStats struct {
	Finished int64 `json:"finished"` // work completed
	// Wasted is work completed after its client had left (timed out or
	// disconnected): the service's time spent for nobody.
	Wasted int64 `json:"wasted"`
	// Pending is work still running or waiting for a slot when the run
	// ended: every one of those clients has left too.
	Pending int64 `json:"pending"`
}

// service is a simulated handler whose work does not stop when its client
// leaves, like a call to a dependency that cannot be cancelled.
type service struct {
	work     func(stop <-chan struct{}) bool // false: stopped by close
	finished atomic.Int64
	wasted   atomic.Int64
	pending  atomic.Int64
	stop     chan struct{}
	once     sync.Once
}

func newService(work func(stop <-chan struct{}) bool) *service {
	return &service{work: work, stop: make(chan struct{})}
}

func (s *service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.pending.Add(1)
	defer s.pending.Add(-1)
	if !s.work(s.stop) {
		return
	}
	s.finished.Add(1)
	if r.Context().Err() != nil {
		s.wasted.Add(1)
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Write([]byte("ok\n")) //nolint:errcheck
}

func (s *service) stats() serviceStats {
	return serviceStats{Finished: s.finished.Load(), Wasted: s.wasted.Load(), Pending: s.pending.Load()}
}

// close ends all work at once: a run is over and its leftovers must not
// disturb the next.
func (s *service) close() { s.once.Do(func() { close(s.stop) }) }

func (s *service) statsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		b, _ := json.Marshal(s.stats())
		w.Header().Set("Content-Type", "application/json")
		w.Write(b) //nolint:errcheck
	})
}

// slotPool is a semaphore whose size can change while requests hold and
// wait for slots; waiters are served in arrival order.
type slotPool struct {
	mu      sync.Mutex
	size    int
	busy    int
	waiters []chan struct{}
}

func newSlotPool(n int) *slotPool { return &slotPool{size: n} }

// acquire waits for a slot; false if stop closed first.
func (p *slotPool) acquire(stop <-chan struct{}) bool {
	p.mu.Lock()
	if p.busy < p.size && len(p.waiters) == 0 {
		p.busy++
		p.mu.Unlock()
		return true
	}
	ch := make(chan struct{})
	p.waiters = append(p.waiters, ch)
	p.mu.Unlock()
	select {
	case <-ch:
		return true
	case <-stop:
		return false // the pool is being thrown away: no bookkeeping needed
	}
}

func (p *slotPool) release() {
	p.mu.Lock()
	p.busy--
	p.grantLocked()
	p.mu.Unlock()
}

func (p *slotPool) resize(n int) {
	p.mu.Lock()
	p.size = n
	p.grantLocked()
	p.mu.Unlock()
}

func (p *slotPool) grantLocked() {
	for p.busy < p.size && len(p.waiters) > 0 {
		close(p.waiters[0])
		p.waiters = p.waiters[1:]
		p.busy++
	}
}

// slotWork holds a slot of pool for d.
func slotWork(pool *slotPool, d time.Duration) func(stop <-chan struct{}) bool {
	return func(stop <-chan struct{}) bool {
		if !pool.acquire(stop) {
			return false
		}
		defer pool.release()
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-stop:
			return false
		}
	}
}

// cpuWork hashes for rounds SHA-256 rounds; it checks stop every few
// hundred rounds only, as real CPU-bound code checks nothing at all.
func cpuWork(rounds int) func(stop <-chan struct{}) bool {
	return func(stop <-chan struct{}) bool {
		var sum [sha256.Size]byte
		for i := 0; i < rounds; i++ {
			sum = sha256.Sum256(sum[:])
			if i%512 == 511 {
				select {
				case <-stop:
					return false
				default:
				}
			}
		}
		sink.Store(uint32(sum[0]))
		return true
	}
}

var sink atomic.Uint32 // keeps the hashing from being optimised away

// calibrate returns the number of rounds that take about d on one core
// and the capacity in requests per second of all cores doing that work.
func calibrate(d time.Duration) (rounds int, capacity float64) {
	never := make(chan struct{})
	rounds = 1000
	for {
		start := time.Now()
		cpuWork(rounds)(never)
		el := time.Since(start)
		if el >= 50*time.Millisecond {
			rounds = int(float64(rounds) * float64(d) / float64(el))
			break
		}
		rounds *= 2
	}
	rounds = max(rounds, 1)
	// Capacity: every core busy for about a second.
	var done atomic.Int64
	deadline := time.Now().Add(time.Second)
	var wg sync.WaitGroup
	start := time.Now()
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			w := cpuWork(rounds)
			for time.Now().Before(deadline) {
				w(never)
				done.Add(1)
			}
		})
	}
	wg.Wait()
	return rounds, float64(done.Load()) / time.Since(start).Seconds()
}

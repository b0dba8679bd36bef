package soak

import (
	"bufio"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// kind is what a client does with its request.
type kind int

const (
	plain      kind = iota // HTTP/1.1 on a kept-alive connection
	h2c                    // HTTP/2 without TLS, prior knowledge
	large                  // HTTP/1.1 with a 100 KB header
	halfClosed             // HTTP/1.1 on its own connection, write side shut after the request
	nKinds
)

var kindNames = [nKinds]string{"http/1.1", "h2c", "large headers", "half-closed"}

// tally is the clients' running counts; the report takes differences.
type tally struct {
	sent      atomic.Int64
	ok        atomic.Int64 // 200 to a request that did not ask for a panic
	shed      atomic.Int64 // 503
	timeout   atomic.Int64 // 504
	internal  atomic.Int64 // 500
	other     atomic.Int64 // any other status
	cancelled atomic.Int64 // the client cancelled before its answer came
	missing   atomic.Int64 // no answer: error, reset or client timeout
	halfLost  atomic.Int64 // half-closed requests without an answer
	skipped   atomic.Int64 // arrivals the generator could not send on time
	// missingBy and sentBy split by kind, for the summary.
	missingBy [nKinds]atomic.Int64
	sentBy    [nKinds]atomic.Int64
	// slowloris connections dialled and closed by the server.
	lorisDials  atomic.Int64
	lorisClosed atomic.Int64
	// errs counts the missing answers by the error the client saw.
	errs [nErrs]atomic.Int64
}

// errKind is why an answer is missing, as the client saw it.
type errKind int

const (
	errTimeout errKind = iota // the client timeout passed
	errDial                   // no connection (refused, ports exhausted)
	errReset                  // the connection was reset or closed without an answer
	errOther
	nErrs
)

var errNames = [nErrs]string{"client timeout", "dial", "reset/EOF", "other"}

func classify(err error) errKind {
	var ne net.Error
	var op *net.OpError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return errTimeout
	case errors.As(err, &op) && op.Op == "dial":
		return errDial
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), strings.Contains(err.Error(), "connection reset"), strings.Contains(err.Error(), "closed"):
		return errReset
	}
	return errOther
}

func (t *tally) miss(k kind, err error) {
	if k == halfClosed {
		// net/http reports a client's half-close as its leaving (the
		// request's context is cancelled) and the middleware sends nothing
		// to a client that left: counted apart, not as a stall.
		t.halfLost.Add(1)
		t.missingBy[k].Add(1)
		return
	}
	t.missing.Add(1)
	t.missingBy[k].Add(1)
	t.errs[classify(err)].Add(1)
}

type counts struct {
	sent, ok, shed, timeout, internal, other, cancelled, missing, halfLost, skipped int64
}

func (t *tally) snapshot() counts {
	return counts{t.sent.Load(), t.ok.Load(), t.shed.Load(), t.timeout.Load(), t.internal.Load(),
		t.other.Load(), t.cancelled.Load(), t.missing.Load(), t.halfLost.Load(), t.skipped.Load()}
}

func (c counts) minus(o counts) counts {
	return counts{c.sent - o.sent, c.ok - o.ok, c.shed - o.shed, c.timeout - o.timeout, c.internal - o.internal,
		c.other - o.other, c.cancelled - o.cancelled, c.missing - o.missing, c.halfLost - o.halfLost, c.skipped - o.skipped}
}

func (c counts) answered() int64 { return c.ok + c.shed + c.timeout + c.internal + c.other }

// clients generate the soak's traffic against one server.
type clients struct {
	cfg   *Config
	addr  string
	url   string
	h1    *http.Client
	h2    *http.Client
	pad   string
	t     tally
	wg    sync.WaitGroup
	trans []*http.Transport
}

func newClients(cfg *Config, addr string) *clients {
	h1 := &http.Transport{
		MaxIdleConns:        4096,
		MaxIdleConnsPerHost: 4096,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	h2 := &http.Transport{Protocols: &p, DisableCompression: true}
	return &clients{
		cfg:   cfg,
		addr:  addr,
		url:   "http://" + addr + workPath,
		h1:    &http.Client{Transport: h1},
		h2:    &http.Client{Transport: h2},
		pad:   strings.Repeat("p", cfg.LargeHeader),
		trans: []*http.Transport{h1, h2},
	}
}

// run offers cfg.Rate requests per second, open loop, until ctx is done,
// and keeps cfg.Slowloris slow connections open; it returns when every
// request has its answer or its error.
func (c *clients) run(ctx context.Context) {
	for range c.cfg.Slowloris {
		c.wg.Go(func() { c.slowloris(ctx) })
	}
	rng := rand.New(rand.NewPCG(uint64(c.cfg.Seed), 0x50a4))
	start := time.Now()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	var sent int64
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case now := <-tick.C:
			due := int64(now.Sub(start).Seconds() * c.cfg.Rate)
			if late := due - sent - maxBurst(c.cfg.Rate); late > 0 {
				// The generator fell behind (a starved CPU): those arrivals
				// are skipped and counted, not sent in a burst later.
				c.t.skipped.Add(late)
				sent += late
			}
			for ; sent < due && ctx.Err() == nil; sent++ {
				c.launch(ctx, rng)
			}
		}
	}
	c.wg.Wait()
	for _, tr := range c.trans {
		tr.CloseIdleConnections()
	}
}

// maxBurst is how many arrivals the generator sends at once to catch up:
// 50 ms of the rate.
func maxBurst(rate float64) int64 { return max(1, int64(rate/20)) }

// launch draws one request's kind and faults and sends it.
func (c *clients) launch(ctx context.Context, rng *rand.Rand) {
	k := plain
	switch x := rng.Float64(); {
	case x < c.cfg.H2C:
		k = h2c
	case x < c.cfg.H2C+c.cfg.Large:
		k = large
	case x < c.cfg.H2C+c.cfg.Large+c.cfg.HalfClosed:
		k = halfClosed
	}
	doPanic := rng.Float64() < c.cfg.Panic
	var cancelAfter time.Duration
	if k != halfClosed && rng.Float64() < c.cfg.Cancel {
		cancelAfter = time.Duration(rng.Int64N(int64(c.cfg.ClientTimeout)/2)) + time.Millisecond
	}
	c.t.sent.Add(1)
	c.t.sentBy[k].Add(1)
	c.wg.Go(func() {
		if k == halfClosed {
			c.halfClose(ctx, doPanic)
			return
		}
		c.request(ctx, k, doPanic, cancelAfter)
	})
}

func (c *clients) request(parent context.Context, k kind, doPanic bool, cancelAfter time.Duration) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), c.cfg.ClientTimeout)
	defer cancel()
	var left atomic.Bool // the client cancelled on purpose
	if cancelAfter > 0 {
		t := time.AfterFunc(cancelAfter, func() { left.Store(true); cancel() })
		defer t.Stop()
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if doPanic {
		req.Header.Set(panicHeader, "1")
	}
	cl := c.h1
	switch k {
	case h2c:
		cl = c.h2
	case large:
		req.Header.Set("X-Soak-Pad", c.pad)
	}
	resp, err := cl.Do(req)
	if err == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	switch {
	case left.Load() && (err != nil || resp == nil):
		c.t.cancelled.Add(1)
	case err != nil:
		c.t.miss(k, err)
	default:
		c.status(resp.StatusCode, doPanic)
	}
}

func (c *clients) status(code int, doPanic bool) {
	switch code {
	case http.StatusOK:
		if doPanic {
			c.t.other.Add(1) // a panicking handler cannot answer 200
			return
		}
		c.t.ok.Add(1)
	case http.StatusServiceUnavailable:
		c.t.shed.Add(1)
	case http.StatusGatewayTimeout:
		c.t.timeout.Add(1)
	case http.StatusInternalServerError:
		c.t.internal.Add(1)
	default:
		c.t.other.Add(1)
	}
}

// halfClose sends one request on a connection of its own, shuts the
// connection's write side and reads the answer.
func (c *clients) halfClose(_ context.Context, doPanic bool) {
	conn, err := net.DialTimeout("tcp", c.addr, c.cfg.ClientTimeout)
	if err != nil {
		c.t.miss(halfClosed, err)
		return
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(c.cfg.ClientTimeout)) //nolint:errcheck
	req := "GET " + workPath + " HTTP/1.1\r\nHost: soak\r\n"
	if doPanic {
		req += panicHeader + ": 1\r\n"
	}
	if _, err := io.WriteString(conn, req+"\r\n"); err != nil {
		c.t.miss(halfClosed, err)
		return
	}
	conn.(*net.TCPConn).CloseWrite() //nolint:errcheck
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		c.t.miss(halfClosed, err)
		return
	}
	resp.Body.Close()
	c.status(resp.StatusCode, doPanic)
}

// slowloris keeps one connection sending a request's header a line at a
// time, dialling again whenever the server closes it.
func (c *clients) slowloris(ctx context.Context) {
	for ctx.Err() == nil {
		conn, err := net.DialTimeout("tcp", c.addr, time.Second)
		if err != nil {
			if !sleep(ctx, time.Second) {
				return
			}
			continue
		}
		c.t.lorisDials.Add(1)
		closed := make(chan struct{})
		go func() { // the server's close (or answer) ends the trickle
			io.Copy(io.Discard, conn) //nolint:errcheck
			close(closed)
		}()
		_, err = io.WriteString(conn, "GET "+workPath+" HTTP/1.1\r\nHost: soak\r\n")
		for err == nil {
			select {
			case <-ctx.Done():
				err = ctx.Err()
			case <-closed:
				err = errors.New("closed")
				c.t.lorisClosed.Add(1)
			case <-time.After(c.cfg.LorisEvery):
				_, err = io.WriteString(conn, "X-Slow: 1\r\n")
			}
		}
		conn.Close()
		<-closed
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

package resiliencegrpc

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/budget"
	"github.com/ylcnfrht/resilience/core/event"
	"github.com/ylcnfrht/resilience/core/property"
	"github.com/ylcnfrht/resilience/core/retryafter"
	"github.com/ylcnfrht/resilience/core/throttle"
)

// Defaults of ClientOptions.
const (
	// DefaultClientRetries is how many times a call is retried after
	// its first attempt.
	DefaultClientRetries = 3
	// DefaultClientDelay is the base of the exponential backoff (with
	// jitter) between attempts when the server sends no pushback: about
	// 100 ms, 200 ms, 400 ms. grpc-go's retry examples start there too.
	DefaultClientDelay = 100 * time.Millisecond
	// DefaultClientMaxRetryWait is the longest wait before a retry: the
	// backoff is capped at it, and a pushback asking for longer ends the
	// retries (the caller gets the answer at once), as
	// outbound.DefaultMaxRetryWait for HTTP.
	DefaultClientMaxRetryWait = 30 * time.Second
)

// AttemptsMetadata is the metadata key a Client marks its retries with:
// the number of attempts before this one, as gRPC's own retries send it
// (grpc-previous-rpc-attempts). First attempts do not carry it. This
// adapter's server reads it (by.IsRetry), so by.RetriesLast
// ranks the retries below first attempts.
const AttemptsMetadata = "grpc-previous-rpc-attempts"

// Throttler is what a Client needs of a client-side throttle: a
// *throttle.Throttle[T] of any T has both methods, so one throttle made
// for an HTTP client (throttle.New(outbound.ThrottleOptions())) can also
// serve the gRPC client of the same dependency. The Client decides what
// the dependency refused itself (see ClientOptions.Throttle); the
// throttle's own IsRejected is used only where it runs as a strategy.
type Throttler interface {
	Allow() bool
	Record(accepted bool)
}

// ClientOptions configures a Client. The zero value retries UNAVAILABLE,
// and RESOURCE_EXHAUSTED that carries a pushback, up to 3 times with
// exponential backoff from 100 ms and jitter, waits what the server's
// pushback says up to 30 s (a longer one, or a "do not retry", ends the
// retries), and has no budget and no throttle.
type ClientOptions struct {
	// Name names the pipeline in telemetry. Default "grpc-client".
	Name string
	// Listener receives the pipeline's events (event.Retry,
	// event.RetryBudgetExceeded, event.Throttled, …). nil means none.
	Listener event.Listener
	// MaxRetries is how many times a call is retried after its first
	// attempt. 0 means DefaultClientRetries; a negative value means no
	// retries (the throttle and the budget's first attempts still count).
	MaxRetries int
	// Delay is the base of the exponential backoff, with decorrelated
	// jitter, between attempts the server sent no pushback for. 0 means
	// DefaultClientDelay.
	Delay time.Duration
	// MaxRetryWait caps every wait before a retry; a pushback asking for
	// longer is not waited for: the call returns its answer at once. 0
	// means DefaultClientMaxRetryWait.
	MaxRetryWait time.Duration
	// RetryableCodes are the status codes worth another attempt. nil (or
	// empty) means UNAVAILABLE and RESOURCE_EXHAUSTED: what this
	// adapter's server answers when it sheds or rate-limits a call before
	// its handler runs. RESOURCE_EXHAUSTED is retried only when the answer
	// carries a pushback (grpc-retry-pushback-ms or a google.rpc.RetryInfo):
	// grpc-go also answers it, locally, for a message over the size limit,
	// which no retry cures. codes.OK is refused.
	RetryableCodes []codes.Code
	// Budget, when set, caps the retries across calls (see budget.Budget):
	// every call records its first attempt, and a retry it denies ends
	// the call with its last answer. Share it with the other clients of
	// the same dependency, HTTP ones (outbound.Options.Budget) included.
	Budget *budget.Budget
	// Throttle, when set, sees every attempt and refuses one locally,
	// with a *ThrottledError, while the dependency refuses most of them.
	// An attempt counts as refused when it ends UNAVAILABLE,
	// RESOURCE_EXHAUSTED or DEADLINE_EXCEEDED; every other code is an
	// answer, and a cancellation or a local throttling is neither.
	Throttle Throttler
}

// ThrottledError is the error of a call its Client's throttle refused
// locally: nothing was sent. Its gRPC status is UNAVAILABLE (status.Code
// reads it through GRPCStatus), the code a shedding server answers, so
// callers that handle an overloaded dependency handle it too; it is not
// retried by the Client. Match it with errors.As, or errors.Is against
// throttle.ErrThrottled or resilience.ErrRejected. Shared: do not modify.
type ThrottledError struct {
	st *status.Status
}

func (e *ThrottledError) Error() string { return e.st.Err().Error() }

// GRPCStatus returns its status: UNAVAILABLE, with a constant message.
func (e *ThrottledError) GRPCStatus() *status.Status { return e.st }

// Is reports whether target is throttle.ErrThrottled or
// resilience.ErrRejected.
func (e *ThrottledError) Is(target error) bool {
	return target == throttle.ErrThrottled || target == resilience.ErrRejected
}

// errThrottled is the one ThrottledError every Client returns.
var errThrottled = &ThrottledError{st: status.New(codes.Unavailable, "resilience: throttled locally, the dependency is refusing requests")}

// Client puts a retry, a retry budget and a client-side throttle around
// the calls of a grpc-go client, as client interceptors: the gRPC
// counterpart of outbound.Transport. Install both interceptors on the
// connection:
//
//	c, err := resiliencegrpc.NewClient(resiliencegrpc.ClientOptions{Budget: b, Throttle: th})
//	conn, err := grpc.NewClient(addr, creds,
//		grpc.WithChainUnaryInterceptor(c.UnaryInterceptor()),
//		grpc.WithChainStreamInterceptor(c.StreamInterceptor()))
//
// A call is retried when its attempt ended with a retryable code
// (ClientOptions.RetryableCodes) and no response headers: a trailers-only
// answer, which is how a server refuses before its handler runs (this
// adapter's server always does), or no answer at all. That is the rule of
// gRPC's own retries; an error after response headers came from a handler
// that ran, and is returned as is. Each retry carries AttemptsMetadata,
// so the server can rank it below fresh work.
//
// The server's pushback is honoured: the grpc-retry-pushback-ms trailer
// first, else the google.rpc.RetryInfo detail, sets the wait; a negative
// or malformed pushback (as this adapter's server sends while it drains,
// or when a rate limit's wait outlasts the caller's deadline) ends the
// retries. A wait that would outlast the call's deadline is not started:
// the call returns its last answer at once, as with outbound.Transport.
// The call's context bounds every attempt and every wait. A context
// marked with property.WithSingleAttempt gets no retries (it is still
// throttled): mark calls that are not safe to repeat, since an
// UNAVAILABLE can also mean a connection lost mid-call.
//
// Streams: a server stream (one request message, desc.ClientStreams
// false) opens at its first read, RecvMsg or Header, and the pipeline
// runs around opening it, sending its request and that read. A refusal,
// which that read brings, is retried as a unary call is: the stream is
// opened again and its request sent again, until its first response;
// after that nothing is retried. (Generated code sends the request and
// CloseSend before it returns the stream; a first read before CloseSend
// gets one attempt.) A client or bidi stream is retried only when it
// cannot be established (grpc-go's NewStream fails, say with no ready
// connection): the server's refusal reaches its first RecvMsg after the
// interceptor has returned it, and the messages sent on it are not kept
// for a replay. grpc-go's own retry policy buffers and replays those
// (README, "Client side"). The throttle counts such a stream by how its
// first RecvMsg (or a Header with metadata) ends, or as an answer when
// its context ends first.
//
// Safe for concurrent use. The zero value is not usable; use NewClient.
type Client struct {
	pipeline *resilience.Pipeline[*attempt]
}

// NewClient returns a Client, or a *resilience.ConfigError naming an
// invalid option.
func NewClient(opts ClientOptions) (*Client, error) {
	if opts.Delay < 0 {
		return nil, &resilience.ConfigError{Field: "ClientOptions.Delay", Problem: "must not be negative, got " + opts.Delay.String()}
	}
	if opts.MaxRetryWait < 0 {
		return nil, &resilience.ConfigError{Field: "ClientOptions.MaxRetryWait", Problem: "must not be negative, got " + opts.MaxRetryWait.String()}
	}
	var retryable [17]bool // codes.OK … codes.Unauthenticated
	if len(opts.RetryableCodes) == 0 {
		retryable[codes.Unavailable], retryable[codes.ResourceExhausted] = true, true
	}
	for _, c := range opts.RetryableCodes {
		if c == codes.OK || int(c) >= len(retryable) {
			return nil, &resilience.ConfigError{Field: "ClientOptions.RetryableCodes", Problem: "must hold error codes only, got " + c.String()}
		}
		retryable[c] = true
	}
	name := opts.Name
	if name == "" {
		name = "grpc-client"
	}
	retries := opts.MaxRetries
	switch {
	case retries == 0:
		retries = DefaultClientRetries
	case retries < 0:
		retries = 0
	}
	delay := opts.Delay
	if delay == 0 {
		delay = DefaultClientDelay
	}
	maxWait := opts.MaxRetryWait
	if maxWait == 0 {
		maxWait = DefaultClientMaxRetryWait
	}
	should := func(o resilience.Outcome[*attempt]) bool {
		a := o.Value
		if o.Err == nil || a == nil || a.header != nil {
			return false
		}
		code := status.Code(o.Err)
		if int(code) >= len(retryable) || !retryable[code] || a.stop {
			return false
		}
		if code == codes.ResourceExhausted && !a.hasPushback {
			return false
		}
		return !a.hasPushback || a.pushback <= maxWait
	}
	b := resilience.NewBuilder[*attempt](resilience.WithName(name), resilience.WithListener(opts.Listener)).
		AddRetry(resilience.RetryOptions[*attempt]{
			MaxRetryAttempts: retries,
			Delay:            delay,
			BackoffType:      resilience.BackoffExponential,
			UseJitter:        true,
			MaxDelay:         maxWait,
			ShouldHandle:     should,
			DelayGenerator: func(_ context.Context, a resilience.RetryArgs[*attempt]) (time.Duration, bool) {
				if v := a.Outcome.Value; v != nil && v.hasPushback {
					return v.pushback, true
				}
				return 0, false
			},
			Budget: opts.Budget,
		})
	if opts.Throttle != nil {
		b.AddResultStrategy(&throttleStrategy{th: opts.Throttle})
	}
	p, err := b.Build()
	if err != nil {
		return nil, err
	}
	return &Client{pipeline: p}, nil
}

// attempt is what one attempt returned besides its error.
type attempt struct {
	header      metadata.MD // nil: no response headers (trailers-only or no answer)
	pushback    time.Duration
	hasPushback bool // pushback holds the server's wait
	stop        bool // the server said not to retry
	stream      *clientStream
}

// readPushback sets a's pushback from a failed attempt's trailer, else
// from the RetryInfo detail of its status.
func (a *attempt) readPushback(trailer metadata.MD, err error) {
	if vs := trailer.Get(PushbackTrailer); len(vs) > 0 {
		// As gRPC defines it, and grpc-go reads it: one value, a
		// non-negative number of milliseconds; anything else means stop.
		if len(vs) > 1 {
			a.stop = true
			return
		}
		d, ok := retryafter.ParsePushback(vs[0])
		a.pushback, a.hasPushback, a.stop = d, ok, !ok
		return
	}
	st, ok := status.FromError(err)
	if !ok {
		return
	}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay() != nil {
			if w := ri.GetRetryDelay().AsDuration(); w >= 0 {
				a.pushback, a.hasPushback = w, true
			}
			return
		}
	}
}

// refused reports whether an attempt's error is the dependency refusing
// it, for the throttle.
func refused(err error) bool {
	if err == nil || errors.Is(err, throttle.ErrThrottled) || errors.Is(err, context.Canceled) {
		return false
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.ResourceExhausted, codes.DeadlineExceeded:
		return true
	}
	return false
}

// throttleStrategy runs a Throttler inside the retry, so each attempt
// is counted and throttled. An established stream is recorded later, by
// the stream itself.
type throttleStrategy struct {
	th Throttler
}

// StrategyName is the throttle's own name (a *throttle.Throttle's
// Options.Name, default "AdaptiveThrottle"), for its events' labels.
func (s *throttleStrategy) StrategyName() string {
	if n, ok := s.th.(resilience.Named); ok && n.StrategyName() != "" {
		return n.StrategyName()
	}
	return "AdaptiveThrottle"
}

func (s *throttleStrategy) ExecuteResult(ctx context.Context, tel resilience.Telemetry, next resilience.ResultNext[*attempt]) (*attempt, error) {
	if !s.th.Allow() {
		tel.Emit(ctx, event.Event{Name: event.Throttled, Err: errThrottled})
		return nil, errThrottled
	}
	a, err := next(ctx)
	if err == nil && a != nil && a.stream != nil {
		a.stream.th = s.th
		return a, nil
	}
	s.th.Record(!refused(err))
	return a, err
}

// markedContext returns ctx with its outgoing metadata marking attempt n
// (n > 0) of a call.
func markedContext(ctx context.Context, n int) context.Context {
	md, _ := metadata.FromOutgoingContext(ctx) // a copy
	if md == nil {
		md = metadata.MD{}
	}
	md.Set(AttemptsMetadata, strconv.Itoa(n))
	return metadata.NewOutgoingContext(ctx, md)
}

// UnaryInterceptor returns the client's unary interceptor, for
// grpc.WithChainUnaryInterceptor (or grpc.WithUnaryInterceptor).
func (c *Client) UnaryInterceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		u := unaryCalls.Get().(*unaryCall)
		u.method, u.req, u.reply, u.cc, u.invoker = method, req, reply, cc, invoker
		u.opts = append(append(u.opts[:0], opts...), u.header, u.trailer)
		_, err := c.pipeline.Execute(ctx, u.run)
		u.release()
		return statusError(err)
	}
}

// unaryCall is the state of one unary call through a Client, pooled
// with its bound callback and its header and trailer options, so that a
// call allocates none of them.
type unaryCall struct {
	n       int // attempts so far; they run one after another
	a       attempt
	tr      metadata.MD
	method  string
	req     any
	reply   any
	cc      *grpc.ClientConn
	invoker grpc.UnaryInvoker
	opts    []grpc.CallOption // the caller's, then header and trailer
	header  grpc.CallOption   // grpc.Header(&a.header)
	trailer grpc.CallOption   // grpc.Trailer(&tr)
	run     func(ctx context.Context) (*attempt, error)
}

var unaryCalls = sync.Pool{New: func() any {
	u := &unaryCall{}
	u.header, u.trailer = grpc.Header(&u.a.header), grpc.Trailer(&u.tr)
	u.run = u.attempt
	return u
}}

// attempt makes one attempt of the call. The retry reads its outcome
// before the next attempt, so one attempt value serves them all.
func (u *unaryCall) attempt(ctx context.Context) (*attempt, error) {
	if u.n > 0 {
		ctx = markedContext(ctx, u.n)
	}
	u.n++
	u.a, u.tr = attempt{}, nil
	err := u.invoker(ctx, u.method, u.req, u.reply, u.cc, u.opts...)
	if err != nil {
		u.a.readPushback(u.tr, err)
	}
	return &u.a, err
}

// release clears u of the call's values and puts it back in the pool.
func (u *unaryCall) release() {
	clear(u.opts)
	u.opts = u.opts[:0]
	u.n, u.a, u.tr = 0, attempt{}, nil
	u.method, u.req, u.reply, u.cc, u.invoker = "", nil, nil, nil, nil
	unaryCalls.Put(u)
}

// statusError returns err as a gRPC status error: a context's end during
// a wait between attempts, which is the pipeline's, becomes the
// CANCELLED or DEADLINE_EXCEEDED grpc-go itself would return.
func statusError(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Err()
	}
	return err
}

// StreamInterceptor returns the client's stream interceptor, for
// grpc.WithChainStreamInterceptor (or grpc.WithStreamInterceptor).
func (c *Client) StreamInterceptor() grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		if !desc.ClientStreams {
			return &lazyStream{pipeline: c.pipeline, ctx: ctx, desc: desc, cc: cc, method: method, streamer: streamer, opts: opts}, nil
		}
		var n atomic.Int32
		a, err := c.pipeline.Execute(ctx, func(actx context.Context) (*attempt, error) {
			if i := int(n.Add(1)) - 1; i > 0 {
				actx = markedContext(actx, i)
			}
			cs, err := streamer(actx, desc, cc, method, opts...)
			if err != nil {
				return &attempt{}, err
			}
			return &attempt{stream: &clientStream{ClientStream: cs}}, nil
		})
		if err != nil {
			return nil, statusError(err)
		}
		s := a.stream
		if s.th != nil {
			// Recorded as an answer if the caller gives up on the
			// stream before anything decided it.
			s.mu.Lock()
			s.stop = context.AfterFunc(ctx, func() { s.record(nil) })
			s.mu.Unlock()
		}
		return s, nil
	}
}

// clientStream records, once, how an established stream was answered
// to the throttle that let it through.
type clientStream struct {
	grpc.ClientStream
	th   Throttler // nil: no throttle
	once sync.Once
	mu   sync.Mutex
	stop func() bool // guarded by mu
}

func (s *clientStream) record(err error) {
	if s.th == nil {
		return
	}
	s.once.Do(func() {
		s.mu.Lock()
		stop := s.stop
		s.mu.Unlock()
		if stop != nil {
			stop()
		}
		s.th.Record(!refused(err))
	})
}

func (s *clientStream) Header() (metadata.MD, error) {
	md, err := s.ClientStream.Header()
	if err != nil || md != nil {
		s.record(err)
	}
	return md, err
}

func (s *clientStream) SendMsg(m any) error {
	err := s.ClientStream.SendMsg(m)
	if err != nil && err != io.EOF {
		s.record(err)
	}
	return err
}

func (s *clientStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err == io.EOF {
		s.record(nil)
	} else {
		s.record(err)
	}
	return err
}

// lazyStream is a stream whose request is one message
// (desc.ClientStreams false: server streaming). It opens at its first
// read (RecvMsg or Header), since that read is what brings a server's
// refusal, and runs the pipeline around opening it, sending the request
// and that read, so a refused stream is opened again and the request
// sent again. When the first read comes before CloseSend (not what
// generated code does), the stream is opened once, without retries.
type lazyStream struct {
	pipeline *resilience.Pipeline[*attempt]
	ctx      context.Context
	desc     *grpc.StreamDesc
	cc       *grpc.ClientConn
	method   string
	streamer grpc.Streamer
	opts     []grpc.CallOption

	open sync.Mutex // held by the first read while it opens the stream
	// Guarded by mu.
	mu     sync.Mutex
	msg    any // the request, once sent
	hasMsg bool
	closed bool              // CloseSend was called
	cur    grpc.ClientStream // the current attempt's stream
	done   bool              // opened: cur is final (nil if none opened)
	err    error             // the first read's error (io.EOF included), once done

	n int // attempts so far; only the attempts, one after another, use it
}

func (s *lazyStream) SendMsg(m any) error {
	s.mu.Lock()
	if cur := s.cur; cur != nil {
		s.mu.Unlock()
		return cur.SendMsg(m)
	}
	defer s.mu.Unlock()
	switch {
	case s.done:
		return io.EOF // ended; RecvMsg returns why
	case s.hasMsg || s.closed:
		return status.Error(codes.Internal, "SendMsg called after CloseSend")
	}
	s.msg, s.hasMsg = m, true
	return nil
}

func (s *lazyStream) CloseSend() error {
	s.mu.Lock()
	if cur := s.cur; cur != nil {
		s.mu.Unlock()
		return cur.CloseSend()
	}
	s.closed = true
	s.mu.Unlock()
	return nil
}

// opened opens the stream through the pipeline unless it is open, its
// first read being read, and reports the stream (nil when none opened),
// the first read's error, and whether this call did the opening.
func (s *lazyStream) opened(read func(cs grpc.ClientStream) error) (grpc.ClientStream, error, bool) {
	s.open.Lock()
	defer s.open.Unlock()
	s.mu.Lock()
	if s.done {
		cur, err := s.cur, s.err
		s.mu.Unlock()
		return cur, err, false
	}
	ctx := s.ctx
	if !s.closed {
		ctx = property.WithSingleAttempt(ctx)
	}
	s.mu.Unlock()
	_, err := s.pipeline.Execute(ctx, s.attempt(read))
	err = statusError(err)
	s.mu.Lock()
	s.done, s.msg, s.err = true, nil, err
	cur := s.cur
	s.mu.Unlock()
	return cur, err, true
}

// attempt returns the pipeline's callback: open a stream, send it the
// request and read from it.
func (s *lazyStream) attempt(read func(cs grpc.ClientStream) error) func(context.Context) (*attempt, error) {
	return func(ctx context.Context) (*attempt, error) {
		// Attempts run one after another, and only here.
		if s.n > 0 {
			ctx = markedContext(ctx, s.n)
		}
		s.n++
		cs, err := s.streamer(ctx, s.desc, s.cc, s.method, s.opts...)
		if err != nil {
			return &attempt{}, err
		}
		// A SendMsg or CloseSend before this point was buffered, one after
		// it goes to cs: either way cs gets each once.
		s.mu.Lock()
		s.cur = cs
		// A send that fails for the stream's end (io.EOF) leaves the
		// answer to the read; any other failure is the attempt's.
		if s.hasMsg {
			if err := cs.SendMsg(s.msg); err != nil && err != io.EOF {
				s.mu.Unlock()
				return &attempt{}, err
			}
		}
		if s.closed {
			_ = cs.CloseSend() // always nil on a client stream
		}
		s.mu.Unlock()
		// io.EOF, a stream that ended well without a message, is no
		// failure to retry nor a refusal: returned as is.
		if err := read(cs); err != nil {
			a := &attempt{}
			a.header, _ = cs.Header() // the stream has ended: does not block
			a.readPushback(cs.Trailer(), err)
			return a, err
		}
		return &attempt{}, nil
	}
}

func (s *lazyStream) RecvMsg(m any) error {
	cur, err, first := s.opened(func(cs grpc.ClientStream) error { return cs.RecvMsg(m) })
	if first || err != nil {
		// The first read's outcome; a first read that failed (or
		// ended the stream) is what every later read returns.
		return err
	}
	return cur.RecvMsg(m)
}

func (s *lazyStream) Header() (metadata.MD, error) {
	cur, _, _ := s.opened(func(cs grpc.ClientStream) error {
		if md, _ := cs.Header(); md != nil {
			return nil
		}
		// No headers: the stream has ended, trailers-only. Its status
		// comes with a read, which consumes no message: there is none.
		var none struct{}
		return cs.RecvMsg(&none)
	})
	if cur == nil {
		return nil, nil // as grpc-go's Header, which leaves the error to RecvMsg
	}
	return cur.Header()
}

func (s *lazyStream) Trailer() metadata.MD {
	s.mu.Lock()
	cur := s.cur
	s.mu.Unlock()
	if cur == nil {
		return nil
	}
	return cur.Trailer()
}

func (s *lazyStream) Context() context.Context {
	s.mu.Lock()
	cur := s.cur
	s.mu.Unlock()
	if cur == nil {
		return s.ctx
	}
	return cur.Context()
}

package resiliencegrpc

import (
	"context"
	"github.com/ylcnfrht/resilience/core/inbound/adapt"
	"runtime/debug"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/grpclog"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// Middleware is the inbound pipeline in front of grpc-go services.
// Register services through Registrar (most callers), or install
// UnaryInterceptor and StreamInterceptor; not both, or every call is
// admitted twice. A Middleware is safe for concurrent use, and every
// service it fronts shares its limits. Build it with New: the zero value
// is not usable. A rejected, timed-out or panicking call leaves nothing
// behind (permit and queue place returned).
type Middleware struct {
	in    *adapt.Kit
	rej   rejections
	timed bool      // inbound's Timed: a deadline can answer for every call
	pool  sync.Pool // of *untimedCall
}

// New validates opts and returns the middleware, or a
// *resilience.ConfigError naming the first invalid field (errors.Is
// resilience.ErrInvalidOptions). Options.Render restyles HTTP responses,
// which gRPC does not send: New refuses it.
func New(opts inbound.Options) (*Middleware, error) {
	if opts.Render != nil {
		return nil, &resilience.ConfigError{Field: "Options.Render", Problem: "gRPC rejections are statuses (see the package documentation's table), not HTTP responses; leave it nil"}
	}
	in, err := adapt.New(framework, opts)
	if err != nil {
		return nil, err
	}
	m := &Middleware{in: in, rej: newRejections(in), timed: in.Timed()}
	m.pool.New = func() any {
		u := &untimedCall{}
		u.run = u.call
		return u
	}
	return m, nil
}

// UnaryInterceptor returns the pipeline as a unary server interceptor, for
// grpc.ChainUnaryInterceptor. grpc-go decodes a unary call's request
// message before any unary interceptor runs, so a call shed here has been
// decoded: prefer Registrar, which sheds before decoding.
func (m *Middleware) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if !m.timed {
			u := m.untimed()
			u.handler, u.req = handler, req
			return u.serve(ctx)
		}
		return m.serveTimed(ctx, func(hctx context.Context, t *timedCall) (err error) {
			t.reply, err = handler(hctx, req)
			return err
		})
	}
}

// StreamInterceptor returns the pipeline as a stream server interceptor,
// for grpc.ChainStreamInterceptor. It admits a stream before its first
// message is read and holds the permit until the handler returns.
// grpc-go calls stream interceptors for streaming RPCs only (and for
// grpc.UnknownServiceHandler): pair it with UnaryInterceptor.
func (m *Middleware) StreamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		return m.stream(srv, ss, handler)
	}
}

// Registrar returns r with every service registered through it behind the
// pipeline: pass it to the generated Register…Server functions in place of
// the *grpc.Server. A unary call is admitted before its request message is
// decoded, and before the server's unary interceptors run; a stream before
// its first message. Services registered on r directly (health,
// reflection) are not shed.
//
//	pb.RegisterGreeterServer(mw.Registrar(s), impl)
func (m *Middleware) Registrar(r grpc.ServiceRegistrar) grpc.ServiceRegistrar {
	return registrar{m: m, r: r}
}

type registrar struct {
	m *Middleware
	r grpc.ServiceRegistrar
}

// RegisterService registers a copy of desc whose method and stream
// handlers run behind the pipeline.
func (r registrar) RegisterService(desc *grpc.ServiceDesc, impl any) {
	d := *desc
	d.Methods = make([]grpc.MethodDesc, len(desc.Methods))
	for i, md := range desc.Methods {
		d.Methods[i] = grpc.MethodDesc{MethodName: md.MethodName, Handler: r.m.methodHandler(md.Handler)}
	}
	d.Streams = make([]grpc.StreamDesc, len(desc.Streams))
	for i, sd := range desc.Streams {
		h := sd.Handler
		sd.Handler = func(srv any, ss grpc.ServerStream) error { return r.m.stream(srv, ss, h) }
		d.Streams[i] = sd
	}
	r.r.RegisterService(&d, impl)
}

// methodHandler wraps a generated unary method handler: admission first,
// then the handler decodes the message (dec) and runs the server's unary
// interceptors and the method.
func (m *Middleware) methodHandler(h grpc.MethodHandler) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
		if !m.timed {
			u := m.untimed()
			u.method, u.srv, u.dec, u.interceptor = h, srv, dec, interceptor
			return u.serve(ctx)
		}
		return m.serveTimed(ctx, func(hctx context.Context, t *timedCall) (err error) {
			t.reply, err = h(srv, hctx, t.dec(dec), interceptor)
			return err
		})
	}
}

// stream runs a streaming RPC's handler behind the pipeline.
func (m *Middleware) stream(srv any, ss grpc.ServerStream, handler grpc.StreamHandler) error {
	if !m.timed {
		u := m.untimed()
		u.stream, u.srv, u.ss = handler, srv, ss
		_, err := u.serve(ss.Context())
		return err
	}
	_, err := m.serveTimed(ss.Context(), func(hctx context.Context, t *timedCall) error {
		return handler(srv, &guardedStream{ServerStream: ss, ctx: hctx, t: t})
	})
	return err
}

// untimedCall is a call served without a deadline of the middleware: the
// handler runs on the call's goroutine, inside Execute. It is pooled, and
// Execute's callback is bound to it once, so an admitted call allocates
// nothing. One of handler, method and stream is set.
type untimedCall struct {
	m   *Middleware
	rpc rpc                             // the call's Request.Raw
	run func(ctx context.Context) error // u.call, bound once
	ran bool

	handler grpc.UnaryHandler // UnaryInterceptor's
	req     any

	method      grpc.MethodHandler // Registrar's unary
	dec         func(any) error
	interceptor grpc.UnaryServerInterceptor

	stream grpc.StreamHandler // a stream's
	ss     grpc.ServerStream

	srv   any
	reply any
}

func (m *Middleware) untimed() *untimedCall {
	u := m.pool.Get().(*untimedCall)
	u.m = m
	return u
}

// serve runs the call through the pipeline and returns its reply and
// error, or the status of its rejection. The call goes back to the pool
// once Execute has returned, when nothing refers to it any more; after a
// panic it is left to the collector.
func (u *untimedCall) serve(ctx context.Context) (any, error) {
	m := u.m
	var reply any
	var err error
	if err = ctx.Err(); err != nil {
		// Expired (or cancelled) on arrival: answered at once, never queued.
		err = m.reject(ctx, err, nil)
	} else {
		u.rpc.ctx = ctx
		err = m.in.Execute(ctx, &u.rpc, u.run)
		if !u.ran {
			err = m.reject(ctx, err, &u.rpc)
		}
		reply = u.reply
	}
	*u = untimedCall{run: u.run}
	m.pool.Put(u)
	if err != nil {
		return nil, err
	}
	return reply, nil
}

// call is Execute's callback.
func (u *untimedCall) call(ctx context.Context) error {
	u.ran = true
	u.rpc.admit(ctx)
	var err error
	switch {
	case u.handler != nil:
		u.reply, err = u.handler(ctx, u.req)
	case u.method != nil:
		u.reply, err = u.method(u.srv, ctx, u.dec, u.interceptor)
	default:
		ss := u.ss
		if ctx != ss.Context() { // a queued call's context carries its view
			ss = &ctxStream{ServerStream: ss, ctx: ctx}
		}
		err = u.stream(u.srv, ss)
	}
	return err
}

// serveTimed runs fn, the rest of the call, through the pipeline with a
// deadline of the middleware and returns the reply fn left in t.reply and
// fn's error, or the status of a rejection. fn runs on a worker through
// core's Handoff, so that the call is answered at the deadline whether or
// not fn watches its context; t guards what fn may still send afterwards.
func (m *Middleware) serveTimed(ctx context.Context, fn func(hctx context.Context, t *timedCall) error) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, m.reject(ctx, err, nil) // expired on arrival
	}
	t := &timedCall{rpc: rpc{ctx: ctx}, sts: grpc.ServerTransportStreamFromContext(ctx)}
	t.m, t.ctx, t.fn = m, ctx, fn
	t.hand.Start(ctx, t) // a goroutine whose stack has grown already, mostly
	if t.hand.Wait() {
		// The deadline passed while fn runs on: fn keeps its permit
		// until it returns, and what it sends is dropped. The RateLimit
		// fields went out as its headers (or, should the deadline come
		// first, are its goroutine's still): none here.
		return nil, m.reject(ctx, t.cause, nil)
	}
	// fn's panic, if any, was raised by Wait, on the call's goroutine.
	switch {
	case !t.ran:
		return nil, m.reject(ctx, t.err, &t.rpc) // not admitted
	case isTimeout(t.err):
		return nil, m.reject(ctx, t.err, &t.rpc) // fn returned after the middleware's timeout
	case t.err != nil:
		return nil, t.err
	}
	return t.reply, nil
}

// Run is a timed call's work, on its worker: fn through ExecuteInPlace,
// whose expired callback answers the deadline while fn runs on.
func (t *timedCall) Run() {
	t.err = t.m.in.ExecuteInPlace(t.ctx, &t.rpc, func(hctx context.Context) error {
		t.ran = true
		t.hctx = hctx
		sctx := grpc.NewContextWithServerTransportStream(hctx, t)
		t.rpc.admit(sctx)
		return t.fn(sctx, t)
	}, t.expire)
}

// expire answers the deadline: the call's goroutine sends the status for
// cause, unless fn returned first.
func (t *timedCall) expire(cause error) {
	if t.hand.Claim() {
		t.cause = cause
		t.hand.Wake()
	}
}

// LatePanic reports a panic of fn after its call was answered, which has
// no call left to reach: grpc-go would have ended the program with it.
func (t *timedCall) LatePanic(v any) {
	grpclog.Component("resilience").Errorf("panic in a handler after its call's deadline was answered: %v\n%s", v, debug.Stack())
}

// isTimeout reports whether err is the middleware's timeout, as
// ExecuteInPlace reports a callback that outlived it.
func isTimeout(err error) bool {
	_, ok := err.(*resilience.TimeoutRejectedError)
	return ok
}

// reject sends the rejection for err, an error from inbound for a call
// that did not run to its end, with the RateLimit fields held for it in
// held (nil: none, or not this goroutine's to read), and returns its
// status.
func (m *Middleware) reject(ctx context.Context, err error, held *rpc) error {
	r, ok := m.rej.rejectionFor(ctx, m.in, err)
	if !ok {
		// The client went away: nobody reads the status.
		return status.FromContextError(err).Err()
	}
	return r.send(ctx, held)
}

// GracefulStop drains the middleware and stops s gracefully: from the
// moment it is called every queued and arriving call is answered
// UNAVAILABLE (reason shutting-down, negative pushback) at once, while
// running calls finish; then s.GracefulStop closes the listeners and
// waits for them. When ctx ends first (the grace period is over) it stops
// s at once (s.Stop: connections closed, the calls' contexts cancelled)
// and returns ctx's error without waiting for handlers that ignore their
// context.
// It returns nil once every handler, late ones included, has returned.
func (m *Middleware) GracefulStop(ctx context.Context, s *grpc.Server) error {
	// Drain marks the middleware draining and closes its limiter before
	// it first waits: with an ended context it does just that, here, so
	// no call is admitted once GracefulStop has begun.
	now, cancel := context.WithCancel(context.Background())
	cancel()
	_ = m.in.Drain(now)
	stopped := make(chan struct{})
	go func() {
		s.GracefulStop()
		close(stopped)
	}()
	err := m.in.Drain(ctx)
	if err == nil {
		select {
		case <-stopped:
			return nil
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	// Stop closes every connection and cancels the calls' contexts; a
	// handler that ignores its context may still run, and GracefulStop's
	// own goroutine returns when it does.
	s.Stop()
	return err
}

// timedCall is the state a timed call's handler shares with the call. It
// is also what grpc.SetHeader, grpc.SendHeader and grpc.SetTrailer reach
// from the handler's context: grpc-go's stream until the call is
// answered.
type timedCall struct {
	hand  adapt.Handoff   // fn on its worker, and the call waiting for its return or its answer
	rpc   rpc             // the call's Request.Raw; its fields are the worker's until Wait returns
	hctx  context.Context // the handler's, set before it runs
	sts   grpc.ServerTransportStream
	ran   bool  // fn ran: the call was admitted
	reply any   // a unary handler's, read once it returned in time
	err   error // ExecuteInPlace's, read once it returned in time
	cause error // the deadline's, set between Claim and Wake

	m   *Middleware // what Run runs
	ctx context.Context
	fn  func(hctx context.Context, t *timedCall) error
}

// errLate is what a handler's sends and receives get once its call was
// answered at the deadline.
var errLate = status.Error(codes.DeadlineExceeded, adapt.MessageTimeout)

// refusing reports whether the handler must no longer touch the stream:
// its call was answered, or its deadline has passed (a handler woken by
// its context's end must find the stream refusing, or it could send after
// the deadline before the call is answered).
func (t *timedCall) refusing() bool {
	return t.hand.Answered() || t.hctx.Err() == context.DeadlineExceeded
}

// dec guards a unary call's decode function: once the call is answered
// the stream is grpc-go's again.
func (t *timedCall) dec(dec func(any) error) func(any) error {
	return func(v any) error {
		if t.refusing() {
			return errLate
		}
		return dec(v)
	}
}

// guardedStream is a timed stream's handler's view of it: its context ends
// at the deadline, and once the call is answered its sends and receives
// fail with DEADLINE_EXCEEDED instead of reaching grpc-go's stream.
type guardedStream struct {
	grpc.ServerStream
	ctx context.Context
	t   *timedCall
}

func (s *guardedStream) Context() context.Context { return s.ctx }

func (s *guardedStream) SendMsg(msg any) error {
	if s.t.refusing() {
		return errLate
	}
	return s.ServerStream.SendMsg(msg)
}

func (s *guardedStream) RecvMsg(msg any) error {
	if s.t.refusing() {
		return errLate
	}
	return s.ServerStream.RecvMsg(msg)
}

func (s *guardedStream) SetHeader(md metadata.MD) error {
	if s.t.refusing() {
		return errLate
	}
	return s.ServerStream.SetHeader(md)
}

func (s *guardedStream) SendHeader(md metadata.MD) error {
	if s.t.refusing() {
		return errLate
	}
	return s.ServerStream.SendHeader(md)
}

func (s *guardedStream) SetTrailer(md metadata.MD) {
	if !s.t.refusing() {
		s.ServerStream.SetTrailer(md)
	}
}

// ctxStream is a stream whose handler sees another context.
type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *ctxStream) Context() context.Context { return s.ctx }

func (t *timedCall) Method() string {
	if t.sts == nil {
		return ""
	}
	return t.sts.Method()
}

func (t *timedCall) SetHeader(md metadata.MD) error {
	if t.sts == nil || t.refusing() {
		return errLate
	}
	return t.sts.SetHeader(md)
}

func (t *timedCall) SendHeader(md metadata.MD) error {
	if t.sts == nil || t.refusing() {
		return errLate
	}
	return t.sts.SendHeader(md)
}

func (t *timedCall) SetTrailer(md metadata.MD) error {
	if t.sts == nil || t.refusing() {
		return errLate
	}
	return t.sts.SetTrailer(md)
}

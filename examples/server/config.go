package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/textproto"
	"strings"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
)

// frameworks lists the -framework values this binary knows, sorted; each
// joins through register. Anything else is an error, never a silent
// fallback to chi.
var frameworks []string

// config is the validated command line.
type config struct {
	framework    string
	addr         string
	timeout      time.Duration
	permitLimit  int
	queueLimit   int
	queueTimeout time.Duration
	overflow     resilience.OverflowPolicy
	adaptive     bool          // the adaptive limiter; permitLimit is its initial limit
	codel        bool          // the CoDel queue discipline on the limiter
	rateLimit    int           // 0: no rate limit
	rateWindow   time.Duration // used only when rateLimit > 0
	rateKey      rateKey
	readyDelay   time.Duration // at shutdown, between /readyz failing and Drain
	shadowShare  int           // percent of decisions left unenforced (Options.Shadow), every stage
	configFile   string        // -config: YAML or JSON, keys named as the flags; "" for none
	debugAddr    string        // -debug-addr: a second, HTTP listener for /debug/limits, /readyz, /healthz; "" for none
}

// rateKey says how requests are partitioned for the rate limit: by client IP
// (header == "") or by the value of one request header.
type rateKey struct {
	header string // canonical header name; "" means the client IP
}

func (k rateKey) String() string {
	if k.header == "" {
		return "ip"
	}
	return "header:" + k.header
}

// flagError is an invalid flag value. Its message starts with the flag's
// name so that a user (or a script reading stderr) knows what to fix.
type flagError struct {
	flag    string // without the dash
	problem string
}

func (e *flagError) Error() string { return "invalid -" + e.flag + ": " + e.problem }

// errHelp is returned when -h or -help was asked for; the usage has already
// been printed and the process exits 0.
var errHelp = flag.ErrHelp

// parseConfig parses and validates args (without the program name). Usage
// and flag-package diagnostics go to usage (io.Discard is fine). It returns
// a *flagError, or the flag package's own error (which also names the flag),
// for any invalid value.
func parseConfig(args []string, usage io.Writer) (config, error) {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(usage)
	var (
		cfg       config
		overflow  string
		rateKeyIn string
	)
	fs.StringVar(&cfg.framework, "framework", "chi", "HTTP framework: "+strings.Join(frameworks, ", "))
	fs.StringVar(&cfg.addr, "addr", "127.0.0.1:0", "listen address (port 0 picks a free port)")
	fs.DurationVar(&cfg.timeout, "timeout", 5*time.Second, "the request's time budget, queue wait included; past it the client gets a 504")
	fs.IntVar(&cfg.permitLimit, "permit-limit", 200, "requests that may run at once (with -adaptive: the initial limit)")
	fs.IntVar(&cfg.queueLimit, "queue-limit", 100, "requests that may wait for a permit (0: no queue)")
	fs.DurationVar(&cfg.queueTimeout, "queue-timeout", 500*time.Millisecond, "longest wait in the queue (0: no limit; wait for a permit or until the client leaves)")
	fs.StringVar(&overflow, "overflow", string(resilience.OverflowDropLowestPriority), "when the queue is full: reject-new, drop-oldest or drop-lowest-priority (the library's default with a priority function, as here)")
	fs.BoolVar(&cfg.adaptive, "adaptive", false, "adaptive concurrency limiter: the limit follows latency, starting at -permit-limit (live in /debug/limits)")
	fs.BoolVar(&cfg.codel, "codel", false, "CoDel queue discipline: a standing queue gets a short queue timeout, so it drains")
	fs.IntVar(&cfg.rateLimit, "rate-limit", 0, "requests per -rate-window per key (0: no rate limit)")
	fs.DurationVar(&cfg.rateWindow, "rate-window", time.Second, "rate-limit window")
	fs.StringVar(&rateKeyIn, "rate-key", "ip", "rate-limit key: ip, or header:NAME")
	var shadow bool
	fs.BoolVar(&shadow, "shadow", false, "run the rate limit, the limiter and the timeout in shadow: decide and count what they would shed (/debug/limits \"shadow\"), enforce nothing")
	fs.IntVar(&cfg.shadowShare, "shadow-share", 0, "percent of requests whose decisions run in shadow, 0 to 100, for a ramp (-shadow is 100)")
	fs.DurationVar(&cfg.readyDelay, "ready-delay", 0, "at shutdown, how long /readyz fails while requests are still served, before draining (Kubernetes: longer than the readiness probe's period)")
	fs.StringVar(&cfg.debugAddr, "debug-addr", "", "a second, HTTP listener for /debug/limits, /readyz and /healthz (outside the middleware), for -framework grpc, whose own listener speaks gRPC only; any framework may use it, to keep them off the public port (empty: none)")
	fs.StringVar(&cfg.configFile, "config", "", "a YAML or JSON file of flag values, keys named as the flags (permit-limit: 50); a flag on the command line wins; reloaded on SIGHUP")
	if err := fs.Parse(args); err != nil {
		return config{}, err // the flag package's message names the flag
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected argument %q: this program takes flags only", fs.Arg(0))
	}
	if cfg.configFile != "" {
		if err := applyConfigFile(fs, cfg.configFile); err != nil {
			return config{}, err
		}
	}

	if !known(cfg.framework) {
		return config{}, &flagError{"framework", fmt.Sprintf("unknown framework %q; want one of: %s", cfg.framework, strings.Join(frameworks, ", "))}
	}
	if cfg.addr == "" {
		return config{}, &flagError{"addr", "must not be empty"}
	}
	if cfg.timeout <= 0 {
		return config{}, &flagError{"timeout", fmt.Sprintf("must be greater than 0, got %v", cfg.timeout)}
	}
	if cfg.permitLimit <= 0 {
		return config{}, &flagError{"permit-limit", fmt.Sprintf("must be greater than 0, got %d", cfg.permitLimit)}
	}
	if cfg.queueLimit < 0 {
		return config{}, &flagError{"queue-limit", fmt.Sprintf("must not be negative, got %d", cfg.queueLimit)}
	}
	if cfg.queueTimeout < 0 {
		return config{}, &flagError{"queue-timeout", fmt.Sprintf("must not be negative, got %v", cfg.queueTimeout)}
	}
	if cfg.shadowShare < 0 || cfg.shadowShare > 100 {
		return config{}, &flagError{"shadow-share", fmt.Sprintf("must be a percent, 0 to 100, got %d", cfg.shadowShare)}
	}
	if shadow {
		cfg.shadowShare = 100
	}
	p, err := resilience.ParseOverflowPolicy(overflow)
	if err != nil {
		return config{}, &flagError{"overflow", fmt.Sprintf("unknown policy %q; want reject-new, drop-oldest or drop-lowest-priority", overflow)}
	}
	cfg.overflow = p
	if cfg.readyDelay < 0 {
		return config{}, &flagError{"ready-delay", fmt.Sprintf("must not be negative, got %v", cfg.readyDelay)}
	}
	if cfg.rateLimit < 0 {
		return config{}, &flagError{"rate-limit", fmt.Sprintf("must not be negative, got %d", cfg.rateLimit)}
	}
	// The window and key are checked even without -rate-limit, so a typo
	// is caught before it matters.
	if cfg.rateWindow <= 0 {
		return config{}, &flagError{"rate-window", fmt.Sprintf("must be greater than 0, got %v", cfg.rateWindow)}
	}
	if cfg.rateKey, err = parseRateKey(rateKeyIn); err != nil {
		return config{}, err
	}
	return cfg, nil
}

func known(framework string) bool {
	for _, f := range frameworks {
		if f == framework {
			return true
		}
	}
	return false
}

// parseRateKey accepts "ip" or "header:NAME" where NAME is a valid HTTP
// header name.
func parseRateKey(s string) (rateKey, error) {
	if s == "ip" {
		return rateKey{}, nil
	}
	name, ok := strings.CutPrefix(s, "header:")
	if !ok {
		return rateKey{}, &flagError{"rate-key", fmt.Sprintf("got %q; want ip or header:NAME", s)}
	}
	if !validHeaderName(name) {
		return rateKey{}, &flagError{"rate-key", fmt.Sprintf("%q is not a valid header name", name)}
	}
	return rateKey{header: textproto.CanonicalMIMEHeaderKey(name)}, nil
}

// validHeaderName reports whether name is a non-empty RFC 9110 token.
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// isHelp reports whether err means the user asked for -h.
func isHelp(err error) bool { return errors.Is(err, errHelp) }

package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	"go.yaml.in/yaml/v3"

	"github.com/ylcnfrht/resilience/core/inbound"
)

// applyConfigFile sets, from the YAML or JSON file at path (JSON is
// YAML), every flag that the command line did not set: a key is a flag's
// name without the dash (permit-limit: 50, timeout: 2s) and its value a
// single value, as the flag would take it. An unknown key, a value the
// flag refuses or a nested value is a *flagError naming the key.
func applyConfigFile(fs *flag.FlagSet, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return &flagError{"config", err.Error()}
	}
	var values map[string]any
	if err := yaml.Unmarshal(b, &values); err != nil {
		return &flagError{"config", fmt.Sprintf("%s: not YAML or JSON: %v", path, err)}
	}
	onCommandLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	slices.Sort(keys) // the first bad key is always the same one
	for _, k := range keys {
		if fs.Lookup(k) == nil || k == "config" {
			return &flagError{k, fmt.Sprintf("unknown key %q in %s: the keys are the flags' names (permit-limit, queue-limit, timeout, ...)", k, path)}
		}
		if onCommandLine[k] {
			continue // a flag given on the command line wins
		}
		var s string
		switch v := values[k].(type) {
		case string:
			s = v
		case bool, int, int64, uint64, float64:
			s = fmt.Sprint(v)
		default:
			return &flagError{k, fmt.Sprintf("in %s: want a single value, got %v", path, v)}
		}
		if err := fs.Set(k, s); err != nil {
			return &flagError{k, fmt.Sprintf("in %s: %q: %v%s", path, s, err, takes(fs.Lookup(k)))}
		}
	}
	return nil
}

// takes says what kind of value flag f takes, for an error about a value
// it refused (the flag package says only "parse error"): a duration's
// unit is the usual slip, since a bare JSON number reads as one.
func takes(f *flag.Flag) string {
	switch kind, _ := flag.UnquoteUsage(f); kind {
	case "duration":
		return `; want a duration with its unit, such as "200ms" or "2s"`
	case "int":
		return "; want a whole number"
	case "": // a boolean flag
		return "; want true or false"
	}
	return ""
}

// reloadCount counts the -config reloads of one server: applied, and
// failed (a bad file, or options the middleware refused; nothing
// changed). /debug/limits shows them as "reloads".
type reloadCount struct {
	OK     atomic.Uint64
	Failed atomic.Uint64
}

// reloads holds each middleware's reloadCount (one per run), for the
// /debug/limits of whichever framework serves it.
var reloads sync.Map // *inbound.Middleware → *reloadCount

func reloadsOf(mw *inbound.Middleware) *reloadCount {
	c, _ := reloads.LoadOrStore(mw, new(reloadCount))
	return c.(*reloadCount)
}

// watchReloads reloads the -config file each time a SIGHUP arrives, until
// stop is closed: the command line is parsed again (its flags still win),
// and the result applied to mw with Reconfigure. A bad file, or one that
// changes what cannot change live, is logged to stderr with the key's
// name and changes nothing. It returns once the signal is registered;
// done is closed when it stops watching.
func watchReloads(args []string, cfg config, mw *inbound.Middleware, stdout, stderr io.Writer, stop <-chan struct{}) (done <-chan struct{}) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	d := make(chan struct{})
	count := reloadsOf(mw)
	go func() {
		defer close(d)
		defer signal.Stop(hup)
		for {
			select {
			case <-stop:
				return
			case <-hup:
			}
			next, err := reload(args, cfg, mw)
			if err != nil {
				count.Failed.Add(1)
				fmt.Fprintf(stderr, "server: reload %s: %v; the configuration in force is unchanged\n", cfg.configFile, err)
				continue
			}
			cfg = next
			count.OK.Add(1)
			fmt.Fprintf(stdout, "reloaded %s: timeout %v; %s; queue %d (timeout %v, overflow %s%s); %s; shadow %d%%\n",
				cfg.configFile, cfg.timeout, limiterSummary(cfg), cfg.queueLimit, cfg.queueTimeout, cfg.overflow, codelSummary(cfg), rateSummary(cfg), cfg.shadowShare)
		}
	}()
	return d
}

// reload parses args and the file again and applies the result to mw,
// refusing the keys that cannot change while the server runs.
func reload(args []string, cur config, mw *inbound.Middleware) (config, error) {
	next, err := parseConfig(args, io.Discard)
	if err != nil {
		return cur, err
	}
	for _, k := range []struct {
		key     string
		changed bool
	}{
		{"framework", next.framework != cur.framework},
		{"addr", next.addr != cur.addr},
		{"adaptive", next.adaptive != cur.adaptive},
		{"rate-limit", (next.rateLimit > 0) != (cur.rateLimit > 0)},
		{"rate-key", next.rateKey != cur.rateKey},
		{"ready-delay", next.readyDelay != cur.readyDelay},
		{"debug-addr", next.debugAddr != cur.debugAddr},
	} {
		if k.changed {
			return cur, &flagError{k.key, "cannot change while the server runs (restart it)" + liveHint(k.key)}
		}
	}
	if err := mw.Reconfigure(inboundOptions(next)); err != nil {
		return cur, asFlagError(err)
	}
	return next, nil
}

func liveHint(key string) string {
	if key == "rate-limit" {
		return ": it can change, but not between 0 (no rate limit) and a limit"
	}
	return ""
}

// limitsHandler serves /debug/limits: the middleware's Stats, with the
// configuration in force ("config", inbound.Settings) and the -config
// reloads ("reloads": ok and failed).
func limitsHandler(mw *inbound.Middleware) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		b, _ := json.Marshal(mw.Stats()) // plain values: cannot fail
		var out map[string]json.RawMessage
		json.Unmarshal(b, &out) //nolint:errcheck // just marshalled
		c := reloadsOf(mw)
		out["config"], _ = json.Marshal(mw.Stats().Config)
		out["reloads"] = json.RawMessage(`{"ok":` + strconv.FormatUint(c.OK.Load(), 10) + `,"failed":` + strconv.FormatUint(c.Failed.Load(), 10) + `}`)
		b, _ = json.Marshal(out)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(append(b, '\n')) //nolint:errcheck
	})
}

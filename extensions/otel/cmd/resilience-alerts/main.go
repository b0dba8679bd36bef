// Command resilience-alerts writes the Prometheus alerting rules of
// package promrules for the parameters given as flags, each defaulting
// to promrules.DefaultConfig:
//
//	go run github.com/ylcnfrht/resilience/extensions/otel/cmd/resilience-alerts \
//		-selector 'namespace="shop",job="api"' -min-request-rate 1 \
//		-shed-threshold 0.02 -runbook-url https://wiki.example.com/runbook -o alerts.yml
//
// -o names the file to write (default: standard output). Each alert
// has -NAME-for and -NAME-severity, and the share alerts -NAME-threshold,
// with NAME one of shed, timeout, instance-refusal, store-fail-closed,
// store-fail-open, late-handlers, limit-at-floor, absent, reload-failed;
// -reload-window is how far back reload-failed looks. -label k=v
// (repeatable) adds a label to every alert. An invalid value exits 2
// with a message naming the flag or the Config field it sets
// (Shed.Threshold for -shed-threshold).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ylcnfrht/resilience/extensions/otel/promrules"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// labels is the repeatable -label flag.
type labels map[string]string

func (l labels) String() string { return "" }

func (l labels) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return errors.New("want name=value")
	}
	l[k] = v
	return nil
}

// run is the whole program; it returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	c := promrules.DefaultConfig()
	c.Labels = labels{}
	fs := flag.NewFlagSet("resilience-alerts", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "file to write (default: standard output)")
	fs.StringVar(&c.Group, "group", c.Group, "name of the rule group")
	fs.StringVar(&c.Selector, "selector", c.Selector, `label matchers added to every selector, as job="api",namespace="prod"`)
	service := fs.String("service-labels", strings.Join(c.ServiceLabels, ","), "labels that tell services apart, comma-separated")
	fs.DurationVar(&c.Window, "window", c.Window, "rate window of the share alerts")
	fs.Float64Var(&c.MinRequestRate, "min-request-rate", c.MinRequestRate, "requests/s below which no share alert fires (0: no guard)")
	fs.StringVar(&c.RunbookURL, "runbook-url", c.RunbookURL, "runbook address; each alert links to #its-name")
	fs.DurationVar(&c.ReloadWindow, "reload-window", c.ReloadWindow, "how far back reload-failed looks for a refused reload")
	fs.Var(labels(c.Labels), "label", "name=value added to every alert (repeatable)")
	for _, a := range []struct {
		name  string
		alert *promrules.Alert
		share bool
	}{
		{"shed", &c.Shed, true}, {"timeout", &c.Timeout, true}, {"instance-refusal", &c.InstanceRefusal, true},
		{"store-fail-closed", &c.StoreFailClosed, true}, {"store-fail-open", &c.StoreFailOpen, true},
		{"late-handlers", &c.LateHandlers, false}, {"limit-at-floor", &c.LimitAtFloor, false}, {"absent", &c.Absent, false},
		{"reload-failed", &c.ReloadFailed, false},
	} {
		if a.share {
			fs.Float64Var(&a.alert.Threshold, a.name+"-threshold", a.alert.Threshold, "share of requests above which "+a.name+" fires")
		}
		fs.DurationVar(&a.alert.For, a.name+"-for", a.alert.For, "how long "+a.name+"'s condition holds before it fires")
		fs.StringVar(&a.alert.Severity, a.name+"-severity", a.alert.Severity, "severity label of "+a.name)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "resilience-alerts: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	c.ServiceLabels = nil
	for _, l := range strings.Split(*service, ",") {
		if l = strings.TrimSpace(l); l != "" {
			c.ServiceLabels = append(c.ServiceLabels, l)
		}
	}
	if len(c.Labels) == 0 {
		c.Labels = nil
	}
	b, err := promrules.Generate(c)
	if err != nil {
		fmt.Fprintln(stderr, "resilience-alerts:", err)
		return 2
	}
	if *out == "" {
		if _, err := stdout.Write(b); err != nil {
			fmt.Fprintln(stderr, "resilience-alerts:", err)
			return 1
		}
		return 0
	}
	if err := os.WriteFile(*out, b, 0o644); err != nil {
		fmt.Fprintln(stderr, "resilience-alerts:", err)
		return 1
	}
	return 0
}

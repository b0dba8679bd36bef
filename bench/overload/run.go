package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ylcnfrht/resilience/examples/overload/lab"
)

// run is the program: 0 on success (and -h), 2 for invalid flags, 1 when
// a run fails.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("overload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	scenarios := fs.String("scenarios", strings.Join(lab.Scenarios, ","), "comma-separated scenarios")
	names := fs.String("contenders", "", "comma-separated contenders (default: all)")
	duration := fs.Duration("duration", 0, "override every scenario's duration (0: the presets')")
	out := fs.String("out", filepath.Join(os.TempDir(), "overload-bench"), "directory for the charts and JSON")
	quiet := fs.Bool("quiet", false, "no progress line")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	cs, err := pick(*names)
	if err != nil {
		fmt.Fprintln(stderr, "overload: -contenders:", err)
		return 2
	}
	var cfgs []lab.Config
	for _, s := range strings.Split(*scenarios, ",") {
		cfg, err := lab.Preset(strings.TrimSpace(s))
		if err != nil {
			fmt.Fprintln(stderr, "overload: -scenarios:", err)
			return 2
		}
		if *duration > 0 {
			cfg.Duration = *duration
			cfg.Steps = scaleSteps(cfg.Steps, *duration)
			if cfg.Window > 0 {
				cfg.Window = *duration / 6
			}
		}
		cfgs = append(cfgs, cfg)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintln(stderr, "overload: -out:", err)
		return 1
	}
	var progress io.Writer
	if !*quiet {
		progress = stderr
	}
	fmt.Fprintf(stdout, "Command: `go run ./bench/overload %s`\n\n", strings.Join(args, " "))
	for _, cfg := range cfgs {
		start := time.Now()
		rep, err := lab.Run(ctx, cfg, cs, progress)
		if err != nil {
			fmt.Fprintln(stderr, "overload:", cfg.Scenario+":", err)
			return 1
		}
		m := rep.Machine
		fmt.Fprintf(stdout, "### %s\n\n%s, %s, %d CPUs (%s), %s; took %v.\n", cfg.Scenario, m.Date, m.GoVersion, m.CPUs, m.CPU, m.OS, time.Since(start).Round(time.Second))
		rep.WriteMarkdown(stdout) //nolint:errcheck
		base := filepath.Join(*out, cfg.Scenario)
		if err := writeFile(base+".svg", rep.WriteSVG); err != nil {
			fmt.Fprintln(stderr, "overload:", err)
			return 1
		}
		if err := writeFile(base+".json", rep.WriteJSON); err != nil {
			fmt.Fprintln(stderr, "overload:", err)
			return 1
		}
		fmt.Fprintf(stdout, "\nChart: %s.svg\n\n", base)
	}
	return 0
}

// scaleSteps moves the preset's steps to the same fractions of d (the
// presets put them at a third and two thirds).
func scaleSteps(steps []lab.Step, d time.Duration) []lab.Step {
	out := make([]lab.Step, len(steps))
	for i, s := range steps {
		out[i] = lab.Step{At: d * time.Duration(i+1) / time.Duration(len(steps)+1), Slots: s.Slots}
	}
	return out
}

func pick(names string) ([]lab.Contender, error) {
	all := contenders()
	if names == "" {
		return all, nil
	}
	var out []lab.Contender
	for _, n := range strings.Split(names, ",") {
		found := false
		for _, c := range all {
			if c.Name == strings.TrimSpace(n) {
				out, found = append(out, c), true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown contender %q", n)
		}
	}
	return out, nil
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

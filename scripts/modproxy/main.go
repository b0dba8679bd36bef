// Command modproxy writes a file-system Go module proxy (the layout
// GOPROXY=file://DIR reads) holding every module of a repository at one
// release version, taken from its tags, so a build outside the repository
// can prove that the tagged modules resolve against each other exactly as
// `go get` would resolve them from the real proxy.
//
//	modproxy -repo DIR -version vX.Y.Z -out PROXYDIR
//
// For every tag "<subdir>/<version>" it reads <subdir>/go.mod at the tag for
// the module path and writes @v/list, .info, .mod and .zip. The zip is made
// with golang.org/x/mod/zip from the tagged tree and, like the go command
// does for a module in a subdirectory, carries the repository's root
// LICENSE when the module has none of its own.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	modzip "golang.org/x/mod/zip"
)

func main() {
	repo := flag.String("repo", ".", "git repository holding the tags")
	version := flag.String("version", "", "release version, e.g. v0.1.0")
	out := flag.String("out", "", "directory to write the proxy into")
	flag.Parse()
	if err := run(*repo, *version, *out); err != nil {
		fmt.Fprintln(os.Stderr, "modproxy:", err)
		os.Exit(1)
	}
}

func run(repo, version, out string) error {
	if !semver.IsValid(version) || out == "" {
		return errors.New("usage: modproxy -repo DIR -version vX.Y.Z -out PROXYDIR")
	}
	repo, err := filepath.Abs(repo)
	if err != nil {
		return err
	}
	tags, err := git(repo, "tag", "--list", "*/"+version)
	if err != nil {
		return err
	}
	n := 0
	for _, tag := range strings.Fields(tags) {
		subdir := strings.TrimSuffix(tag, "/"+version)
		if err := writeModule(repo, tag, subdir, version, out); err != nil {
			return fmt.Errorf("%s: %w", tag, err)
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("no tag */%s in %s", version, repo)
	}
	fmt.Printf("modproxy: %d modules at %s in %s\n", n, version, out)
	return nil
}

// writeModule writes the proxy files of the module in subdir at tag.
func writeModule(repo, tag, subdir, version, out string) error {
	gomod, err := git(repo, "show", tag+":"+path.Join(subdir, "go.mod"))
	if err != nil {
		return err
	}
	mf, err := modfile.ParseLax("go.mod", []byte(gomod), nil)
	if err != nil {
		return err
	}
	if mf.Module == nil {
		return errors.New("go.mod has no module line")
	}
	m := module.Version{Path: mf.Module.Mod.Path, Version: version}
	escaped, err := module.EscapePath(m.Path)
	if err != nil {
		return err
	}
	dir := filepath.Join(out, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	when, err := git(repo, "log", "-1", "--format=%cI", tag)
	if err != nil {
		return err
	}
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(when))
	if err != nil {
		return err
	}
	info, _ := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, t.UTC()})
	if err := os.WriteFile(filepath.Join(dir, version+".info"), info, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, version+".mod"), []byte(gomod), 0o644); err != nil {
		return err
	}
	tree, err := os.MkdirTemp("", "modproxy-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tree)
	archive := exec.Command("sh", "-c", `git archive --format=tar "$1" -- "$2" | tar -x -C "$3"`, "sh", tag, subdir, tree)
	archive.Dir = repo
	if b, err := archive.CombinedOutput(); err != nil {
		return fmt.Errorf("git archive: %v: %s", err, b)
	}
	moddir := filepath.Join(tree, filepath.FromSlash(subdir))
	if _, err := os.Stat(filepath.Join(moddir, "LICENSE")); errors.Is(err, os.ErrNotExist) {
		if license, err := git(repo, "show", tag+":LICENSE"); err == nil {
			if err := os.WriteFile(filepath.Join(moddir, "LICENSE"), []byte(license), 0o644); err != nil {
				return err
			}
		}
	}
	var zip bytes.Buffer
	if err := modzip.CreateFromDir(&zip, m, moddir); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, version+".zip"), zip.Bytes(), 0o644); err != nil {
		return err
	}
	list, err := os.OpenFile(filepath.Join(dir, "list"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(list, version)
	if cerr := list.Close(); err == nil {
		err = cerr
	}
	return err
}

func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Command e2elanes runs make e2e: the e2e packages of every row of the test matrix as one queue,
// in the order given (the slowest first within a row, row after row), on -lanes packages at once,
// each package its own go test on a rig of its own. A lane that is free takes the next package,
// of whichever row: the next row's first packages start while the row before finishes its last
// ones, instead of a lane standing idle at the end of every row.
//
// Each row's packages go through a testreport of their own (-stage "e2e <row>"), fed a package's
// go test -json output once the package is done, so its lines come whole and in one piece. A row's
// environment comes from e2e/rowenv.sh: the first row's is built before anything starts, the
// later rows' meanwhile at the lowest CPU priority, awaited before their first package.
//
//	go run ./hack/e2elanes -lanes 2 -timeout 60m -row k1.37-c2.4 -pkgs "p1 p2" -row k1.35-c1.7 -pkgs "p3" -skip '^TestX$'
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/probeshim/probeshim/internal/build/buildstore"
	"github.com/probeshim/probeshim/internal/testkit/procrecord"
)

// row is one row of the matrix and what runs on it.
type row struct {
	name string
	pkgs []string
	skip string

	env    func() (string, error) // rowenv.sh's exports, waited for
	report io.WriteCloser         // the row's testreport's standard input
	done   chan error             // the testreport's exit
	mu     sync.Mutex
	first  time.Time
	last   time.Time
	failed bool
}

type job struct {
	row *row
	pkg string
}

func main() {
	var rows []*row
	last := func() (*row, error) {
		if len(rows) == 0 {
			return nil, errors.New("-row first")
		}
		return rows[len(rows)-1], nil
	}
	flag.Func("row", "a row of the matrix (e2e/rowenv.sh); the -pkgs and -skip after it are its", func(v string) error {
		rows = append(rows, &row{name: v})
		return nil
	})
	flag.Func("pkgs", "the row's packages, space-separated, in the order they start", func(v string) error {
		r, err := last()
		if err == nil {
			r.pkgs = strings.Fields(v)
		}
		return err
	})
	flag.Func("skip", "go test -skip for the row's packages", func(v string) error {
		r, err := last()
		if err == nil {
			r.skip = v
		}
		return err
	})
	lanes := flag.Int("lanes", 2, "packages running at once; 1: one after another on the default rig")
	timeout := flag.String("timeout", "60m", "go test -timeout of each package")
	flag.Parse()
	if len(rows) == 0 || *lanes < 1 {
		fmt.Fprintln(os.Stderr, "e2elanes: want -lanes >= 1 and at least one -row")
		os.Exit(2)
	}
	if err := run(rows, *lanes, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "e2elanes:", err)
		os.Exit(1)
	}
}

func run(rows []*row, lanes int, timeout string) error {
	removeStore, err := shareBuilds()
	if err != nil {
		return err
	}
	defer removeStore()
	var out sync.Mutex // whole lines from the testreports, one at a time
	for i, r := range rows {
		r.env = rowEnv(r.name, i > 0)
		if i == 0 {
			if _, err := r.env(); err != nil {
				return err
			}
		}
		if err := r.startReport(&out); err != nil {
			return err
		}
	}

	queue := make(chan job)
	go func() {
		for _, r := range rows {
			for _, p := range r.pkgs {
				queue <- job{r, p}
			}
		}
		close(queue)
	}()
	t0 := time.Now()
	var wg sync.WaitGroup
	for l := 1; l <= lanes; l++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range queue {
				j.row.run(l, j.pkg, lanes, timeout)
			}
		}()
	}
	wg.Wait()

	var failed []string
	for _, r := range rows {
		r.report.Close()
		if err := <-r.done; err != nil || r.failed {
			failed = append(failed, r.name)
		}
	}
	recordTimes(rows, time.Since(t0))
	if len(failed) > 0 {
		return fmt.Errorf("rows failed: %s", strings.Join(failed, ", "))
	}
	return nil
}

// shareBuilds makes the run's build store (internal/build/buildstore) and names it to the
// packages: each binary the rigs and suites build is built once per run, not once per package.
// The folder is recorded (procrecord) for the next run to remove if this one is killed.
func shareBuilds() (remove func(), err error) {
	dir, err := os.MkdirTemp("", "probeshim-build-store-")
	if err != nil {
		return nil, err
	}
	forget, err := procrecord.NewRecorder(procrecord.Dir(), procrecord.Self()).Add(nil, []string{dir})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := os.Setenv(buildstore.Env, dir); err != nil {
		return nil, err
	}
	return func() {
		if err := os.RemoveAll(dir); err != nil {
			fmt.Fprintln(os.Stderr, "e2elanes: removing the build store:", err)
			return
		}
		if err := forget(); err != nil {
			fmt.Fprintln(os.Stderr, "e2elanes:", err)
		}
	}, nil
}

// rowEnv builds the row's binaries (at nice 19 when later: beside the rows before it) and returns
// a wait for its exports.
func rowEnv(name string, later bool) func() (string, error) {
	args := []string{"e2e/rowenv.sh", name}
	if later {
		args = append([]string{"nice", "-n", "19"}, args...)
	}
	var (
		once sync.Once
		env  string
		err  error
	)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stderr = os.Stderr
	var buf bytes.Buffer
	cmd.Stdout = &buf
	startErr := cmd.Start()
	return func() (string, error) {
		once.Do(func() {
			if startErr != nil {
				err = startErr
				return
			}
			if err = cmd.Wait(); err != nil {
				err = fmt.Errorf("e2e/rowenv.sh %s: %w", name, err)
				return
			}
			env = buf.String()
		})
		return env, err
	}
}

// startReport starts the row's testreport; its lines go to standard output whole.
func (r *row) startReport(out *sync.Mutex) error {
	cmd := exec.Command("go", "run", "./hack/testreport", "-stage", "e2e "+r.name)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	lines, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	r.report, r.done = in, make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(lines)
		sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
		for sc.Scan() {
			out.Lock()
			fmt.Println(sc.Text())
			out.Unlock()
		}
		r.done <- cmd.Wait()
	}()
	return nil
}

// run runs one package of the row on lane l and hands its output to the row's testreport.
func (r *row) run(l int, pkg string, lanes int, timeout string) {
	env, err := r.env()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2elanes: %s: %v\n", pkg, err)
		r.finish(true)
		return
	}
	r.mu.Lock()
	if r.first.IsZero() {
		r.first = time.Now()
		fmt.Printf("== e2e row %s: %s\n", r.name, strings.TrimPrefix(strings.TrimSpace(env), "export "))
	}
	r.mu.Unlock()
	fmt.Printf("== lane %d: %s (row %s)\n", l, pkg, r.name)

	args := []string{"test", "-json", "-count=1", "-timeout", timeout}
	if r.skip != "" {
		args = append(args, "-skip", r.skip)
	}
	args = append(append([]string{"-c", `eval "$ROWENV" && exec go "$@"`, "go"}, args...), pkg)
	cmd := exec.Command("bash", args...)
	cmd.Env = append(os.Environ(), "ROWENV="+env)
	if lanes > 1 {
		cmd.Env = append(cmd.Env, "PROBESHIM_RIG_PER_PACKAGE=1")
	}
	var buf bytes.Buffer
	cmd.Stdout = &buf
	cmd.Stderr = &buf // a build failure is not JSON: testreport prints it as it is
	t0 := time.Now()
	failed := cmd.Run() != nil
	fmt.Printf("== lane %d: %s (row %s) done in %s\n", l, pkg, r.name, time.Since(t0).Round(time.Second))
	r.mu.Lock()
	_, werr := r.report.Write(buf.Bytes())
	r.mu.Unlock()
	r.finish(failed || werr != nil)
}

func (r *row) finish(failed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = r.failed || failed
	r.last = time.Now()
}

// recordTimes appends each row's wall time (its first package's start to its last one's end) to the
// time table's records ($PROBESHIM_TEST_TIMES). Rows overlap: with more than one, each is recorded as
// beside the others and the lanes' whole time as the stage "e2e", so the table's total counts it once.
func recordTimes(rows []*row, wall time.Duration) {
	path := os.Getenv("PROBESHIM_TEST_TIMES")
	if path == "" {
		return
	}
	var b strings.Builder
	for _, r := range rows {
		if r.first.IsZero() {
			continue
		}
		beside := ""
		if len(rows) > 1 {
			beside = `,"beside":"the other rows, in the e2e lanes"`
		}
		fmt.Fprintf(&b, "{\"stage\":\"e2e %s\"%s,\"seconds\":%d}\n", r.name, beside, int(r.last.Sub(r.first).Seconds()))
	}
	if len(rows) > 1 {
		fmt.Fprintf(&b, "{\"stage\":\"e2e\",\"seconds\":%d}\n", int(wall.Seconds()))
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		_, err = f.WriteString(b.String())
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2elanes: times:", err)
	}
}

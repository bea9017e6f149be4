// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package procrecord

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// DirEnv, when set, is the folder of the records instead of Dir's default; tests point it at a
// folder of their own so that they never sweep what other runs recorded.
const DirEnv = "PROBESHIM_TEST_RECORDS"

// Dir is the folder of the records: $PROBESHIM_TEST_RECORDS, else probeshim-test-records-<uid>
// in the temp folder. One per user: a process can end only its own user's processes anyway, and
// nobody else can write records there that make it remove folders.
func Dir() string {
	if d := os.Getenv(DirEnv); d != "" {
		return d
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("probeshim-test-records-%d", os.Getuid()))
}

// Record is what one process (the owner) started and has not cleaned up yet.
type Record struct {
	Owner     Proc     `json:"owner"`
	Processes []Proc   `json:"processes"`
	Folders   []string `json:"folders"`
}

func recordName(owner Proc) string { return fmt.Sprintf("%d-%d.json", owner.PID, owner.Start) }

// ownerOf reads the owner back from a record's file name (for files that cannot be parsed).
func ownerOf(name string) (Proc, bool) {
	base, _, _ := strings.Cut(name, ".")
	pid, start, ok := strings.Cut(base, "-")
	if !ok {
		return Proc{}, false
	}
	p, err1 := strconv.Atoi(pid)
	s, err2 := strconv.ParseUint(start, 10, 64)
	return Proc{PID: p, Start: s}, err1 == nil && err2 == nil
}

// ensureDir creates dir, readable only by us, and refuses one someone else owns.
func ensureDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a folder", dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("%s belongs to uid %d, not to us", dir, st.Uid)
	}
	return nil
}

// Recorder keeps one process's record in dir up to date: the file exists while something it
// started is recorded and not yet cleaned up.
type Recorder struct {
	dir   string
	owner Proc

	mu    sync.Mutex
	next  int
	parts map[int]Record // Owner unset
}

// NewRecorder records in dir what owner started.
func NewRecorder(dir string, owner Proc) *Recorder {
	return &Recorder{dir: dir, owner: owner, parts: map[int]Record{}}
}

// Path is the record's file.
func (r *Recorder) Path() string { return filepath.Join(r.dir, recordName(r.owner)) }

// Add records processes and folders, and returns the function that forgets them again once
// they are cleaned up.
func (r *Recorder) Add(procs []Proc, folders []string) (forget func() error, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := r.next
	r.next++
	r.parts[id] = Record{Processes: procs, Folders: folders}
	if err := r.write(); err != nil {
		delete(r.parts, id)
		return nil, err
	}
	return func() error {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.parts, id)
		return r.write()
	}, nil
}

func (r *Recorder) write() error {
	if len(r.parts) == 0 {
		if err := os.Remove(r.Path()); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	rec := Record{Owner: r.owner}
	ids := make([]int, 0, len(r.parts))
	for id := range r.parts {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		rec.Processes = append(rec.Processes, r.parts[id].Processes...)
		rec.Folders = append(rec.Folders, r.parts[id].Folders...)
	}
	return Write(r.dir, rec)
}

// Write writes rec to dir (atomically: a sweep never reads half a record).
func Write(dir string, rec Record) error {
	if err := ensureDir(dir); err != nil {
		return err
	}
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(dir, recordName(rec.Owner))
	if err := os.WriteFile(path+".tmp", b, 0o600); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}

// Sweep ends what the records in dir list whose owner is gone: it kills each recorded process
// whose pid still has the recorded start time, removes the recorded folders and deletes the
// record. Records of live owners stay. It returns one line per record it swept, saying what.
func Sweep(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) || len(entries) == 0 {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if err := ensureDir(dir); err != nil {
		return nil, err
	}
	// One sweep at a time: test binaries that start together would otherwise each report the same
	// record. The lock goes with the process that holds it, even when it is killed.
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return nil, err
	}
	entries, err = os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var lines []string
	var errs []error
	for _, e := range entries {
		name := e.Name()
		path := filepath.Join(dir, name)
		owner, ok := ownerOf(name)
		if !ok || owner.Alive() {
			continue
		}
		if !strings.HasSuffix(name, ".json") { // a record killed while being written
			_ = os.Remove(path)
			continue
		}
		var rec Record
		b, err := os.ReadFile(path)
		if err == nil {
			err = json.Unmarshal(b, &rec)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("test records: %s: %w", path, err))
			_ = os.Remove(path)
			continue
		}
		line, err := sweepOne(rec)
		if err != nil {
			errs = append(errs, err)
		}
		if err := os.Remove(path); err != nil {
			errs = append(errs, err)
		}
		lines = append(lines, line)
	}
	return lines, errors.Join(errs...)
}

func sweepOne(rec Record) (string, error) {
	var ended, gone []string
	for _, p := range rec.Processes {
		if p.Kill() {
			ended = append(ended, fmt.Sprintf("%s pid %d", p.Name, p.PID))
		} else {
			gone = append(gone, fmt.Sprintf("%s pid %d", p.Name, p.PID))
		}
	}
	removed := 0
	var errs []error
	for _, f := range rec.Folders {
		f = filepath.Clean(f)
		// A folder of its own, never / or a top-level one, whatever the record says.
		if !filepath.IsAbs(f) || strings.Count(f, "/") < 2 {
			errs = append(errs, fmt.Errorf("test records: not removing %q", f))
			continue
		}
		if _, err := os.Lstat(f); err != nil {
			continue
		}
		if err := os.RemoveAll(f); err != nil {
			errs = append(errs, err)
			continue
		}
		removed++
	}
	var b strings.Builder
	b.WriteString("test records: ended ")
	if len(ended) == 0 {
		b.WriteString("no process")
	} else {
		b.WriteString(list(ended))
	}
	if len(gone) == 1 {
		fmt.Fprintf(&b, " (%s was gone already)", gone[0])
	} else if len(gone) > 1 {
		fmt.Fprintf(&b, " (%s were gone already)", list(gone))
	}
	folders := "folders"
	if removed == 1 {
		folders = "folder"
	}
	fmt.Fprintf(&b, ", removed %d %s, left by %s pid %d that is gone", removed, folders, rec.Owner.Name, rec.Owner.PID)
	return b.String(), errors.Join(errs...)
}

// list joins items as "a", "a and b", "a, b and c".
func list(items []string) string {
	if len(items) == 1 {
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

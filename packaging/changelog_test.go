// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package packaging

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"sigs.k8s.io/yaml"
)

// changelogEntry is the part of chglog's YAML (nfpm's changelog) the tests read.
type changelogEntry struct {
	Semver  string    `json:"semver"`
	Date    time.Time `json:"date"`
	Changes []struct {
		Note string `json:"note"`
	} `json:"changes"`
}

func (e changelogEntry) notes() []string {
	var out []string
	for _, c := range e.Changes {
		out = append(out, c.Note)
	}
	return out
}

// scratchRepo is a git repository in a temporary folder holding copies of version.sh and
// changelog.sh, as the project's own.
type scratchRepo struct {
	t   *testing.T
	dir string
}

func newScratchRepo(t *testing.T) *scratchRepo {
	t.Helper()
	r := &scratchRepo{t: t, dir: t.TempDir()}
	if err := os.MkdirAll(filepath.Join(r.dir, "packaging"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"version.sh", "changelog.sh"} {
		b, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(r.dir, "packaging", s), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r.git("init", "-q")
	return r
}

func (r *scratchRepo) git(args ...string) string {
	r.t.Helper()
	return r.gitAt("2026-11-29T10:00:00Z", args...)
}

func (r *scratchRepo) gitAt(date string, args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_AUTHOR_DATE="+date, "GIT_COMMITTER_DATE="+date)
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// commit makes an empty commit with that subject at that date (UTC, RFC 3339).
func (r *scratchRepo) commit(date, subject string) {
	r.t.Helper()
	r.gitAt(date, "commit", "-q", "--allow-empty", "-m", subject, "-m", "A body, which the changelog leaves out.")
}

func (r *scratchRepo) version() string {
	r.t.Helper()
	return r.run(nil, "packaging/version.sh")
}

// changelog runs changelog.sh for version and format and parses what it prints.
func (r *scratchRepo) changelog(version, format string, env ...string) []changelogEntry {
	r.t.Helper()
	out := r.run(env, "packaging/changelog.sh", version, format)
	var entries []changelogEntry
	if err := yaml.Unmarshal([]byte(out), &entries); err != nil {
		r.t.Fatalf("changelog.sh %s %s printed what is not chglog's YAML: %v\n%s", version, format, err, out)
	}
	return entries
}

func (r *scratchRepo) run(env []string, name string, args ...string) string {
	r.t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = r.dir
	cmd.Env = append(append(os.Environ(), "PROBESHIM_VERSION=", "SOURCE_DATE_EPOCH="), env...)
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = string(ee.Stderr)
		}
		r.t.Fatalf("%s %v: %v\n%s", name, args, err, stderr)
	}
	return strings.TrimSpace(string(out))
}

// TestChangelogScript runs packaging/changelog.sh in scratch repositories through a project's life:
// no tag, a pre-release, a release, commits after it, a tree with uncommitted changes, more commits
// than an entry lists, a shallow clone and no git at all; and checks the entries, their versions
// (version.sh's), their dates (the commits'), and that the notes fit both formats.
func TestChangelogScript(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs git")
	}
	r := newScratchRepo(t)
	if err := os.WriteFile(filepath.Join(r.dir, "README"), []byte("scratch\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.git("add", "packaging", "README")
	r.commit("2026-11-29T10:00:00Z", "first: the scripts")
	long := "prober: a subject far longer than a changelog line, as this project writes them — " +
		`with "quotes", a back\slash, a colon: and # a hash, and	a tab, going on past eighty columns`
	r.commit("2026-11-30T08:00:00Z", long)

	// No tag: one entry for this version with every subject, newest first, dated by HEAD.
	v := r.version()
	for _, format := range []string{"deb", "rpm"} {
		entries := r.changelog(v, format)
		if len(entries) != 1 || entries[0].Semver != v+"-1" || !entries[0].Date.Equal(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)) {
			t.Fatalf("%s without a tag: %+v", format, entries)
		}
		notes := entries[0].notes()
		if len(notes) != 2 || notes[1] != "first: the scripts" {
			t.Fatalf("%s notes: %q", format, notes)
		}
		checkNoteFits(t, format, notes[0], long)
	}
	// SOURCE_DATE_EPOCH dates this build's entry, as every file of the package.
	if e := r.changelog(v, "deb", "SOURCE_DATE_EPOCH=1800000000"); !e[0].Date.Equal(time.Unix(1_800_000_000, 0)) {
		t.Fatalf("entry dated %s with SOURCE_DATE_EPOCH=1800000000", e[0].Date)
	}

	r.git("tag", "v0.1.0-rc.1")
	r.commit("2026-12-01T08:00:00Z", "fix: after the release candidate")
	r.gitAt("2026-12-01T09:00:00Z", "tag", "-a", "-m", "release", "v0.1.0") // annotated: its commit's date counts
	r.git("tag", "not-a-release")
	// The tag's own build: its entry is this version's, none before it.
	v = r.version()
	entries := r.changelog(v, "rpm")
	if got := semvers(entries); !slices.Equal(got, []string{"0.1.0-1", "0.1.0~rc.1-1"}) || v != "0.1.0" {
		t.Fatalf("at v0.1.0 (version %s): entries %q", v, got)
	}
	if got := entries[0].notes(); !slices.Equal(got, []string{"fix: after the release candidate"}) || !entries[0].Date.Equal(time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)) {
		t.Fatalf("v0.1.0's entry: %q at %s", got, entries[0].Date)
	}
	if got := entries[1].notes(); len(got) != 2 || got[1] != "first: the scripts" {
		t.Fatalf("v0.1.0-rc.1's entry: %q", got)
	}

	// Commits after the release: an entry of their own above the releases; uncommitted changes said.
	for i := range 53 {
		r.commit(fmt.Sprintf("2026-12-02T08:%02d:00Z", i), fmt.Sprintf("change %d", i))
	}
	if err := os.WriteFile(filepath.Join(r.dir, "README"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	v = r.version()
	if !strings.HasSuffix(v, ".dirty") {
		t.Fatalf("version %s of a changed tree", v)
	}
	entries = r.changelog(v, "deb")
	if got := semvers(entries); !slices.Equal(got, []string{v + "-1", "0.1.0-1", "0.1.0~rc.1-1"}) {
		t.Fatalf("after v0.1.0: entries %q", got)
	}
	notes := entries[0].notes()
	want := []string{"Built with uncommitted changes.", "change 52"}
	if len(notes) != 52 || !slices.Equal(notes[:2], want) || notes[50] != "change 3" ||
		notes[51] != "... and 3 earlier commits: see the probeshim repository." {
		t.Fatalf("after v0.1.0, %d notes: %q ... %q", len(notes), notes[:2], notes[49:])
	}
	for i := 1; i < len(entries); i++ {
		if !entries[i].Date.Before(entries[i-1].Date) {
			t.Errorf("entry %s dated %s, not before the newer entry's %s", entries[i].Semver, entries[i].Date, entries[i-1].Date)
		}
	}
	if again := r.changelog(v, "deb"); fmt.Sprint(again) != fmt.Sprint(entries) {
		t.Fatal("two runs on one commit wrote different changelogs")
	}
	r.git("checkout", "-q", "README")

	// A shallow clone: one entry, saying so, with the one commit it has.
	shallow := t.TempDir()
	if out, err := exec.Command("git", "clone", "-q", "--depth", "1", "file://"+r.dir, shallow).CombinedOutput(); err != nil {
		t.Fatalf("git clone --depth 1: %v\n%s", err, out)
	}
	sr := &scratchRepo{t: t, dir: shallow}
	entries = sr.changelog("1.2.3", "deb")
	if len(entries) != 1 || !slices.Equal(entries[0].notes(), []string{"Built from a shallow clone: only its newest commit is listed here.", "change 52"}) {
		t.Fatalf("shallow clone: %+v", entries)
	}

	// No git: one entry, saying so.
	plain := &scratchRepo{t: t, dir: t.TempDir()}
	if err := os.CopyFS(plain.dir, os.DirFS(r.dir)); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(plain.dir, ".git")); err != nil {
		t.Fatal(err)
	}
	entries = plain.changelog("0.0.0~git00000000000000.uncommitted", "rpm", "SOURCE_DATE_EPOCH=1800000000", "GIT_CEILING_DIRECTORIES="+filepath.Dir(plain.dir))
	if len(entries) != 1 || !slices.Equal(entries[0].notes(), []string{"Built outside a git checkout: no history to list here."}) {
		t.Fatalf("no git: %+v", entries)
	}
}

func semvers(entries []changelogEntry) []string {
	var out []string
	for _, e := range entries {
		out = append(out, e.Semver)
	}
	return out
}

// checkNoteFits checks a note made of subject: for deb one line of at most 76 characters (with
// nfpm's "  * ", Debian's 80 columns), cut at a word; for rpm the whole subject in lines of at most
// 78 (with "- " or the two-space indent, 80), tabs as spaces.
func checkNoteFits(t *testing.T, format, note, subject string) {
	t.Helper()
	subject = strings.ReplaceAll(subject, "\t", " ")
	if !utf8.ValidString(note) {
		t.Fatalf("%s note is not UTF-8: %q", format, note)
	}
	switch format {
	case "deb":
		cut, ok := strings.CutSuffix(note, " ...")
		if !ok || strings.Contains(note, "\n") || utf8.RuneCountInString(note) > 76 || !strings.HasPrefix(subject, cut+" ") {
			t.Fatalf("deb note %q of %q: want one line of at most 76 characters, the subject cut at a word", note, subject)
		}
	case "rpm":
		lines := strings.Split(note, "\n")
		for i, l := range lines {
			if utf8.RuneCountInString(l) > 78 || (i > 0 && !strings.HasPrefix(l, "  ")) {
				t.Fatalf("rpm note line %q: want at most 78 characters, continued two spaces in", l)
			}
			lines[i] = strings.TrimSpace(l)
		}
		if strings.Join(lines, " ") != subject {
			t.Fatalf("rpm note %q is not the whole subject %q", note, subject)
		}
	}
}

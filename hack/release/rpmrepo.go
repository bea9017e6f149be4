// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// rpmRepo writes the dnf repository at dir: the .rpm files under their architecture
// (x86_64/, aarch64/), repodata/ from createrepo_c (Debian's createrepo-c package, `make release`
// installs it: the metadata format is createrepo's and its tool is the reference), and
// repodata/repomd.xml.asc, the signature dnf checks with repo_gpgcheck.
func rpmRepo(ctx context.Context, dir string, rpms []string, s *signer, date time.Time) error {
	for _, rpm := range rpms {
		arch, err := rpmArch(filepath.Base(rpm))
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, arch, filepath.Base(rpm))
		if err := copyFile(rpm, dst); err != nil {
			return err
		}
		// primary.xml records each file's mtime.
		if err := os.Chtimes(dst, date, date); err != nil {
			return err
		}
	}
	// Reproducible: the revision and every timestamp of repomd.xml are the commit's time, the
	// compression gzip (what every dnf and yum reads), no sqlite databases (dnf reads the XML).
	rev := strconv.FormatInt(date.Unix(), 10)
	if _, err := run(ctx, dir, nil, "createrepo_c", "--quiet", "--no-database", "--workers", "1",
		"--revision", rev, "--set-timestamp-to-revision", "--general-compress-type", "gz",
		"--checksum", "sha256", "."); err != nil {
		return err
	}
	return s.detachFile(filepath.Join(dir, "repodata", "repomd.xml"))
}

// rpmArch is the architecture field of an rpm file name (name-version-release.arch.rpm).
func rpmArch(file string) (string, error) {
	base := strings.TrimSuffix(file, ".rpm")
	i := strings.LastIndexByte(base, '.')
	if base == file || i < 0 {
		return "", fmt.Errorf("%s: not name-version-release.arch.rpm", file)
	}
	return base[i+1:], nil
}

// dnfRepoFile is the .repo file users put in /etc/yum.repos.d/. The packages themselves are not
// signed (nfpm can sign them; the publishing part decides): dnf checks the signed repomd.xml
// (repo_gpgcheck), which holds the checksum of primary.xml, which holds each package's.
func dnfRepoFile(baseURL string) []byte {
	return []byte(fmt.Sprintf(`# probeshim's packages. dnf checks the signed repository metadata (repo_gpgcheck),
# which holds every package's checksum; the packages themselves are not signed (gpgcheck=0).
[probeshim]
name=probeshim
baseurl=%s/rpm
enabled=1
repo_gpgcheck=1
gpgcheck=0
gpgkey=%s/probeshim-release-key.asc
`, baseURL, baseURL))
}

// aptSourcesFile is the deb822 sources file users put in /etc/apt/sources.list.d/, with the key
// probeshim-release-key.asc as it is downloaded in /etc/apt/keyrings/probeshim.asc (apt reads an
// armored key by its .asc name, so no gpg --dearmor and no gnupg on the node).
func aptSourcesFile(baseURL string) []byte {
	return []byte(fmt.Sprintf(`Types: deb
URIs: %s/apt
Suites: %s
Components: %s
Signed-By: /etc/apt/keyrings/probeshim.asc
`, baseURL, aptSuite, aptComponent))
}

func copyFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return writeFile(dst, data)
}

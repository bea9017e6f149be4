// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package main

import (
	"bytes"
	"crypto"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/clearsign"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// The user ID of the key a dry run makes when no release key is given: whoever imports it sees it
// is not the project's.
const (
	dryRunName    = "probeshim release DRY RUN"
	dryRunComment = "throwaway key of one dry run, never trust it"
	dryRunEmail   = "probeshim@users.noreply.github.com"
)

// signer makes OpenPGP signatures with one key, all dated the same fixed time. With a fixed key,
// its signatures are then reproducible too: Ed25519 (and RSA PKCS#1 v1.5) signatures depend on
// nothing but the key and the signed bytes once go-crypto's random salt notation is off.
type signer struct {
	entity    *openpgp.Entity
	key       openpgp.Key // the signing key: the primary key or a signing subkey
	config    *packet.Config
	ephemeral bool
}

// newSigner reads the armored private key in keyFile (decrypting it with passphrase if it is
// protected), or, with keyFile "", makes a throwaway Ed25519 key. Signatures are dated epoch, or
// for a key made after epoch, at the latest time the key itself carries.
func newSigner(keyFile, passphrase string, epoch time.Time) (*signer, error) {
	if keyFile == "" {
		return ephemeralSigner(epoch)
	}
	f, err := os.Open(keyFile)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ring, err := openpgp.ReadArmoredKeyRing(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", keyFile, err)
	}
	if len(ring) != 1 || ring[0].PrivateKey == nil {
		return nil, fmt.Errorf("%s: want one armored private key, found %d keys", keyFile, len(ring))
	}
	e := ring[0]
	if e.PrivateKey.Encrypted {
		if passphrase == "" {
			return nil, fmt.Errorf("%s: the key is protected; set PROBESHIM_RELEASE_KEY_PASSPHRASE", keyFile)
		}
		if err := e.DecryptPrivateKeys([]byte(passphrase)); err != nil {
			return nil, fmt.Errorf("%s: %w", keyFile, err)
		}
	}
	return signerAt(e, epoch, false)
}

// ephemeralSigner makes a new Ed25519 key (v4, "EdDSA legacy", which gpgv 2.2 and apt read),
// created at epoch: a dry run signs everything as a release does, with a key nobody trusts.
func ephemeralSigner(epoch time.Time) (*signer, error) {
	cfg := &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA, Curve: packet.Curve25519,
		DefaultHash: crypto.SHA512, Time: func() time.Time { return epoch }}
	e, err := openpgp.NewEntity(dryRunName, dryRunComment, dryRunEmail, cfg)
	if err != nil {
		return nil, err
	}
	// NewEntity adds an encryption subkey; a signing key has no use for it.
	e.Subkeys = nil
	return signerAt(e, epoch, true)
}

func signerAt(e *openpgp.Entity, epoch time.Time, ephemeral bool) (*signer, error) {
	at := epoch
	key, ok := e.SigningKey(at)
	if !ok {
		// A key made after the commit: sign at the latest date the key names, fixed as the key is.
		at = e.PrimaryKey.CreationTime
		later := func(t time.Time) {
			if t.After(at) {
				at = t
			}
		}
		for _, id := range e.Identities {
			if id.SelfSignature != nil {
				later(id.SelfSignature.CreationTime)
			}
		}
		for _, sk := range e.Subkeys {
			later(sk.PublicKey.CreationTime)
			if sk.Sig != nil {
				later(sk.Sig.CreationTime)
			}
		}
		if key, ok = e.SigningKey(at); !ok {
			return nil, errors.New("the key has no signing key valid at the commit's time or after its own dates (expired or revoked?)")
		}
	}
	if key.PrivateKey == nil || key.PrivateKey.Encrypted {
		return nil, errors.New("the signing key's private part is missing or still encrypted")
	}
	off := false
	cfg := &packet.Config{
		DefaultHash:  crypto.SHA512,
		Time:         func() time.Time { return at },
		SigningKeyId: key.PublicKey.KeyId,
		// The salt notation would make every signature differ; see signer.
		NonDeterministicSignaturesViaNotation: &off,
	}
	return &signer{entity: e, key: key, config: cfg, ephemeral: ephemeral}, nil
}

// detach writes an armored detached signature of data to w (a file's .asc, Release.gpg,
// repomd.xml.asc).
func (s *signer) detach(w io.Writer, data io.Reader) error {
	return openpgp.ArmoredDetachSign(w, s.entity, data, s.config)
}

// detachFile writes the armored detached signature of the file at p to p+".asc".
func (s *signer) detachFile(p string) error {
	return s.detachFileTo(p, p+".asc")
}

func (s *signer) detachFileTo(p, sig string) error {
	in, err := os.Open(p)
	if err != nil {
		return err
	}
	defer in.Close()
	var buf bytes.Buffer
	if err := s.detach(&buf, in); err != nil {
		return fmt.Errorf("signing %s: %w", p, err)
	}
	return os.WriteFile(sig, buf.Bytes(), 0o644)
}

// clearsign returns data cleartext-signed (InRelease).
func (s *signer) clearsign(data []byte) ([]byte, error) {
	var buf bytes.Buffer
	w, err := clearsign.Encode(&buf, s.key.PrivateKey, s.config)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(data); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// publicKey returns the armored public key (what apt's signed-by and dnf's gpgkey read).
func (s *signer) publicKey() ([]byte, error) {
	var buf bytes.Buffer
	w, err := armor.Encode(&buf, openpgp.PublicKeyType, nil)
	if err != nil {
		return nil, err
	}
	if err := s.entity.Serialize(w); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	buf.WriteByte('\n')
	return buf.Bytes(), nil
}

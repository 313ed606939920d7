package password

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// sealedPrefix starts a sealed secret as it is stored; a stored secret
// without it is a plain one, as every secret was before sealing.
const sealedPrefix = "sealed:v1:"

// MinKeyLen is the shortest secret key accepted, in characters.
const MinKeyLen = 32

// ErrNoKey is a sealed secret read by a process that has no key.
var ErrNoKey = errors.New("the second-factor secret is encrypted and this server has no secret key (HANDOFF_SECRET_KEY, or the variable auth.secret_key_env names) to read it")

// errWrongKey is a sealed secret the key does not open.
var errWrongKey = errors.New("the second-factor secret is encrypted with another secret key than this server's")

// Sealer encrypts second-factor secrets at rest with AES-256-GCM, under a
// key derived (HKDF-SHA-256) from a secret kept outside the database, so
// the file and its backups hold no usable secret. A nil *Sealer (no key
// configured) stores secrets as they are and reads plain ones.
type Sealer struct{ aead cipher.AEAD }

// NewSealer makes a Sealer from the secret key: at least MinKeyLen
// characters (say 32 random bytes as base64, openssl rand -base64 32).
func NewSealer(key string) (*Sealer, error) {
	if utf8.RuneCountInString(key) < MinKeyLen {
		return nil, fmt.Errorf("the secret key is %d characters; it must be at least %d (openssl rand -base64 32 makes one)", utf8.RuneCountInString(key), MinKeyLen)
	}
	k, err := hkdf.Key(sha256.New, []byte(key), nil, "handoff: second-factor secrets v1", 32)
	if err != nil {
		return nil, fmt.Errorf("password: derive the key: %w", err)
	}
	block, err := aes.NewCipher(k)
	if err != nil {
		return nil, fmt.Errorf("password: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("password: %w", err)
	}
	return &Sealer{aead: aead}, nil
}

// Sealed reports whether a stored secret is encrypted.
func Sealed(stored string) bool { return strings.HasPrefix(stored, sealedPrefix) }

// Seal encrypts a plain secret for whom (it is bound to them: a sealed
// secret copied to another person does not open); with no key, or a
// secret already sealed, it returns it as it is.
func (s *Sealer) Seal(secret, whom string) string {
	if s == nil || secret == "" || Sealed(secret) {
		return secret
	}
	nonce := make([]byte, s.aead.NonceSize())
	_, _ = rand.Read(nonce) // crypto/rand.Read never fails (Go 1.24+)
	out := s.aead.Seal(nonce, nonce, []byte(secret), []byte(whom))
	return sealedPrefix + base64.RawStdEncoding.EncodeToString(out)
}

// Open returns the plain secret of a stored one: a plain one as it is, a
// sealed one decrypted (ErrNoKey without a key).
func (s *Sealer) Open(stored, whom string) (string, error) {
	if !Sealed(stored) {
		return stored, nil
	}
	if s == nil {
		return "", ErrNoKey
	}
	raw, err := base64.RawStdEncoding.DecodeString(stored[len(sealedPrefix):])
	if err != nil || len(raw) < s.aead.NonceSize() {
		return "", errWrongKey
	}
	n := s.aead.NonceSize()
	plain, err := s.aead.Open(nil, raw[:n], raw[n:], []byte(whom))
	if err != nil {
		return "", errWrongKey
	}
	return string(plain), nil
}

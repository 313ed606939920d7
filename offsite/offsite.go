// Package offsite copies backups to an S3-compatible bucket (AWS S3,
// Backblaze B2, Cloudflare R2, MinIO, versitygw) and back: upload with a
// read-back check of size and SHA-256, the newest N kept, a listing, and a
// verified download for restore. It knows files, not the database: the
// store writes and checks backups, this package moves them.
package offsite

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/handoff/handoff/config"
)

// markerSuffix names a copy's verification record: the object
// prefix+name+".verified", written only after the copy was read back
// whole. A copy is verified when its record is there, never because it
// is listed: an upload whose read-back failed, and whose delete failed
// too, leaves a copy without one.
const markerSuffix = ".verified"

// marker is the verification record's body.
type marker struct {
	V          int       `json:"v"`
	Name       string    `json:"name"`
	Size       int64     `json:"size"`
	SHA256     string    `json:"sha256"`
	VerifiedAt time.Time `json:"verified_at"`
}

// sumKey is the user metadata that carries a copy's SHA-256, computed
// here from the local file before the upload; S3 returns it as
// X-Amz-Meta-Sha256.
const sumKey = "Sha256"

// Copy is one backup in the bucket.
type Copy struct {
	Name     string    `json:"name"` // the backup's file name, the key without the prefix
	Key      string    `json:"key"`
	Size     int64     `json:"size"`
	SHA256   string    `json:"sha256,omitempty"` // from the copy's metadata; "" in a listing
	Uploaded time.Time `json:"uploaded"`
	// Verified says the copy was read back whole after its upload: its
	// verification record is in the bucket. Only verified copies count
	// toward Keep; a restore checks any copy again before it is used.
	Verified bool `json:"verified"`
}

// Target is one configured bucket and prefix.
type Target struct {
	c       *minio.Client
	cfg     config.Target
	isName  func(string) bool
	timeout time.Duration
}

// New builds the client for t. isName says which object names under the
// prefix are backups (store.IsBackupName): only those are listed and
// pruned, so nothing else in the bucket is ever deleted. Nothing is sent
// until the first call.
func New(t config.Target, isName func(string) bool) (*Target, error) {
	endpoint, secure, lookup := "s3."+t.Region+".amazonaws.com", true, minio.BucketLookupAuto
	if t.Endpoint != "" {
		u, err := url.Parse(t.Endpoint)
		if err != nil {
			return nil, fmt.Errorf("offsite: target_endpoint: %w", err)
		}
		endpoint, secure, lookup = u.Host, u.Scheme == "https", minio.BucketLookupPath
	}
	// Sane limits at every step: the per-call deadline (Timeout) bounds
	// the whole, retries included; these keep one dead connection from
	// eating it.
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 2 * time.Minute,
		ExpectContinueTimeout: 5 * time.Second,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConnsPerHost:   4,
	}
	c, err := minio.New(endpoint, &minio.Options{
		Creds:        credentials.NewStaticV4(t.AccessKey, t.SecretKey, ""),
		Secure:       secure,
		Region:       t.Region,
		BucketLookup: lookup,
		Transport:    tr,
		// A PUT of a whole object is idempotent, so a retry is safe;
		// three tries ride out a blip without hiding an outage.
		MaxRetries: 3,
	})
	if err != nil {
		return nil, fmt.Errorf("offsite: %w", err)
	}
	return &Target{c: c, cfg: t, isName: isName, timeout: t.Timeout}, nil
}

// URL names the target as the file does: s3://bucket/prefix.
func (t *Target) URL() string { return t.cfg.URL() }

// Keep is how many copies are kept.
func (t *Target) Keep() int { return t.cfg.Keep }

// Upload copies the local backup file at path to prefix+name, then reads
// the copy back and compares its size and SHA-256 with the file's; a copy
// that does not match is deleted and the upload fails. sum is the file's
// SHA-256 in hex, as the store computed it while writing the file
// (store.BackupToDir), so the file is read once, for the upload. Only
// after the read-back matched is the copy's verification record written
// (prefix+name+".verified"): that record, not the listing, is what makes
// it a verified copy. A copy that failed is deleted, and if the delete
// fails too (the store died) it stays unverified: never counted toward
// Keep, deleted by a later Prune. Upload keeps every copy: Prune deletes
// the ones past Keep, and its failure is not the upload's.
func (t *Target) Upload(ctx context.Context, path, name, sum string) (Copy, error) {
	if len(sum) != sha256.Size*2 {
		return Copy{}, fmt.Errorf("offsite: upload %s: %q is not a SHA-256 in hex", name, sum)
	}
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	f, err := os.Open(path)
	if err != nil {
		return Copy{}, fmt.Errorf("offsite: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Copy{}, fmt.Errorf("offsite: %w", err)
	}
	size := fi.Size()
	key := t.cfg.Prefix + name
	info, err := t.c.PutObject(ctx, t.cfg.Bucket, key, f, size, minio.PutObjectOptions{
		ContentType:  "application/octet-stream",
		UserMetadata: map[string]string{sumKey: sum},
	})
	if err != nil {
		return Copy{}, fmt.Errorf("offsite: upload %s to %s: %w", name, t.URL(), err)
	}
	// The store said yes; now prove the bytes it keeps are ours. Reading
	// the copy back is the check every S3-compatible store supports (an
	// ETag is an MD5 only for some uploads on some stores).
	gotSize, gotSum, err := t.readBack(ctx, key)
	if err == nil && (gotSize != size || gotSum != sum) {
		err = fmt.Errorf("the copy has %d bytes with SHA-256 %s, the file %d bytes with SHA-256 %s", gotSize, gotSum, size, sum)
	}
	if err != nil {
		// A copy that cannot be shown whole is not counted as one.
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer rcancel()
		_ = t.c.RemoveObject(rctx, t.cfg.Bucket, key, minio.RemoveObjectOptions{})
		return Copy{}, fmt.Errorf("offsite: verify the copy of %s at %s: %w", name, t.URL(), err)
	}
	up := info.LastModified
	if up.IsZero() {
		up = time.Now()
	}
	rec, err := json.Marshal(marker{V: 1, Name: name, Size: size, SHA256: sum, VerifiedAt: time.Now().UTC()})
	if err == nil {
		_, err = t.c.PutObject(ctx, t.cfg.Bucket, key+markerSuffix, bytes.NewReader(rec), int64(len(rec)), minio.PutObjectOptions{ContentType: "application/json"})
	}
	if err != nil {
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer rcancel()
		_ = t.c.RemoveObject(rctx, t.cfg.Bucket, key, minio.RemoveObjectOptions{})
		return Copy{}, fmt.Errorf("offsite: record the verified copy of %s at %s (so it does not count as one): %w", name, t.URL(), err)
	}
	return Copy{Name: name, Key: key, Size: size, SHA256: sum, Uploaded: up.UTC(), Verified: true}, nil
}

func (t *Target) readBack(ctx context.Context, key string) (int64, string, error) {
	obj, err := t.c.GetObject(ctx, t.cfg.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return 0, "", err
	}
	defer obj.Close()
	return hashReader(obj)
}

// List returns the copies under the prefix, newest first, each marked
// Verified when its verification record is there. Only names that are
// backups are listed.
func (t *Target) List(ctx context.Context) ([]Copy, error) {
	out, _, err := t.list(ctx)
	return out, err
}

// list is List, and the keys of verification records whose copy is gone.
func (t *Target) list(ctx context.Context) ([]Copy, []string, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	var out []Copy
	markers := map[string]string{} // copy name → the record's key
	for o := range t.c.ListObjects(ctx, t.cfg.Bucket, minio.ListObjectsOptions{Prefix: t.cfg.Prefix}) {
		if o.Err != nil {
			return nil, nil, fmt.Errorf("offsite: list %s: %w", t.URL(), o.Err)
		}
		name := strings.TrimPrefix(o.Key, t.cfg.Prefix)
		if strings.Contains(name, "/") {
			continue
		}
		if c, ok := strings.CutSuffix(name, markerSuffix); ok && t.isName(c) {
			markers[c] = o.Key
			continue
		}
		if !t.isName(name) {
			continue
		}
		out = append(out, Copy{Name: name, Key: o.Key, Size: o.Size, Uploaded: o.LastModified.UTC()})
	}
	for i := range out {
		if _, ok := markers[out[i].Name]; ok {
			out[i].Verified = true
			delete(markers, out[i].Name)
		}
	}
	var orphans []string
	for _, k := range markers {
		orphans = append(orphans, k)
	}
	sort.Strings(orphans)
	// Backup names hold their time, so names sort like times.
	sort.Slice(out, func(i, j int) bool { return out[i].Name > out[j].Name })
	return out, orphans, nil
}

// NewestVerified is the newest verified copy in list (as List returns it).
func NewestVerified(list []Copy) (Copy, bool) {
	for _, c := range list {
		if c.Verified {
			return c, true
		}
	}
	return Copy{}, false
}

// Prune deletes the verified copies past the newest Keep, oldest first,
// each with its verification record; only backups under the prefix are
// candidates. A copy without a record (an upload that failed and could
// not be deleted, or one written before handoff kept records) is never
// counted, so it never makes a verified copy go; it is deleted once Keep
// verified copies newer than it are kept. A record whose copy is gone is
// deleted too. Prune runs after a verified Upload; a copy it fails to
// delete stays in the bucket, and the next Prune tries again.
func (t *Target) Prune(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	all, orphans, err := t.list(ctx)
	if err != nil {
		return err
	}
	var verified []Copy
	for _, c := range all {
		if c.Verified {
			verified = append(verified, c)
		}
	}
	for i := t.cfg.Keep; i < len(verified); i++ {
		if err := t.c.RemoveObject(ctx, t.cfg.Bucket, verified[i].Key, minio.RemoveObjectOptions{}); err != nil {
			return fmt.Errorf("offsite: delete the old copy %s from %s: %w", verified[i].Name, t.URL(), err)
		}
		orphans = append(orphans, verified[i].Key+markerSuffix)
	}
	if n := min(t.cfg.Keep, len(verified)); n > 0 && n == t.cfg.Keep {
		oldestKept := verified[n-1].Name
		for _, c := range all {
			if c.Verified || c.Name >= oldestKept {
				continue
			}
			if err := t.c.RemoveObject(ctx, t.cfg.Bucket, c.Key, minio.RemoveObjectOptions{}); err != nil {
				return fmt.Errorf("offsite: delete the unverified copy %s from %s: %w", c.Name, t.URL(), err)
			}
		}
	}
	for _, k := range orphans {
		if err := t.c.RemoveObject(ctx, t.cfg.Bucket, k, minio.RemoveObjectOptions{}); err != nil {
			return fmt.Errorf("offsite: delete the verification record %s from %s: %w", k, t.URL(), err)
		}
	}
	return nil
}

// ErrNotFound is a name that is not a copy in the bucket.
var ErrNotFound = errors.New("offsite: no such copy")

// Download writes the copy called name into w and checks it against the
// SHA-256 stored with it at upload; a copy without that metadata, or one
// whose bytes differ, is an error (w then holds bytes not to be used).
func (t *Target) Download(ctx context.Context, name string, w io.Writer) (Copy, error) {
	if strings.Contains(name, "/") || !t.isName(name) {
		return Copy{}, fmt.Errorf("%w: %q is not a backup's name", ErrNotFound, name)
	}
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	key := t.cfg.Prefix + name
	obj, err := t.c.GetObject(ctx, t.cfg.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return Copy{}, fmt.Errorf("offsite: download %s: %w", key, err)
	}
	defer obj.Close()
	st, err := obj.Stat()
	if err != nil {
		if minio.ToErrorResponse(err).Code == "NoSuchKey" {
			return Copy{}, fmt.Errorf("%w: %s has no %s", ErrNotFound, t.URL(), name)
		}
		return Copy{}, fmt.Errorf("offsite: download %s: %w", key, err)
	}
	want := st.UserMetadata[sumKey]
	if want == "" {
		want = st.Metadata.Get("X-Amz-Meta-" + sumKey)
	}
	if want == "" {
		return Copy{}, fmt.Errorf("offsite: %s carries no SHA-256 (it was not uploaded by handoff), so it cannot be checked", key)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, h), obj)
	if err != nil {
		return Copy{}, fmt.Errorf("offsite: download %s: %w", key, err)
	}
	got := hex.EncodeToString(h.Sum(nil))
	if n != st.Size || got != want {
		return Copy{}, fmt.Errorf("offsite: the download of %s has %d bytes with SHA-256 %s, but the copy was uploaded with %d bytes and SHA-256 %s", key, n, got, st.Size, want)
	}
	return Copy{Name: name, Key: key, Size: n, SHA256: got, Uploaded: st.LastModified.UTC()}, nil
}

func hashReader(r io.Reader) (int64, string, error) {
	h := sha256.New()
	n, err := io.Copy(h, r)
	return n, hex.EncodeToString(h.Sum(nil)), err
}

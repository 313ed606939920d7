package store

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"testing"
)

// TestOldTokenRecordsKeepTheirRole: a token stored before scopes existed
// (a role, no scope) decodes with its role's meaning, and a new one keeps
// its scope and no role.
func TestOldTokenRecordsKeepTheirRole(t *testing.T) {
	st := openTest(t)
	old := map[string]struct {
		raw  string
		want Scope
	}{
		"old-admin":    {`{"v":1,"id":"T1","name":"ci","user":"boss","role":"admin","created_at":"2026-11-01T10:00:00Z"}`, ScopeAdmin},
		"old-approver": {`{"v":1,"id":"T2","name":"n8n","user":"boss","role":"approver","created_at":"2026-11-01T10:00:00Z"}`, ScopeApprove},
	}
	hashOf := func(s string) []byte { h := sha256.Sum256([]byte(s)); return h[:] }
	err := st.update(context.Background(), func(tx *Tx) error {
		for secret, rec := range old {
			var id struct{ ID string }
			if err := json.Unmarshal([]byte(rec.raw), &id); err != nil {
				return err
			}
			if err := tx.bucket(bucketTokens).Put(hashOf(secret), []byte(rec.raw)); err != nil {
				return err
			}
			if err := tx.bucket(bucketTokensByID).Put([]byte(id.ID), hashOf(secret)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for secret, rec := range old {
		got, err := st.TokenByHash(hashOf(secret))
		if err != nil || got.Scope != rec.want {
			t.Errorf("%s: scope %q, %v; want %q", secret, got.Scope, err, rec.want)
		}
	}
	if err := st.CreateToken(context.Background(), hashOf("new"), Token{ID: "T3", Name: "keys", User: "boss", Scope: ScopeKeys, CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	toks, err := st.Tokens()
	if err != nil || len(toks) != 3 {
		t.Fatalf("tokens %+v %v", toks, err)
	}
	if toks[2].Scope != ScopeKeys || toks[2].Role != "" {
		t.Errorf("a new token read back as %+v, want scope keys and no role", toks[2])
	}
}

package store

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"testing"

	"github.com/oklog/ulid/v2"
)

// TestCreateTokenNameOnceUnderConcurrency: twenty admins creating a token of
// the same name at once get one token; the name check and the write share
// one transaction, and so does the audit entry.
func TestCreateTokenNameOnceUnderConcurrency(t *testing.T) {
	st := openTest(t)
	const n = 20
	errs := make([]error, n)
	together(n, func(i int) {
		sum := sha256.Sum256([]byte(fmt.Sprint("secret-", i)))
		errs[i] = st.CreateToken(context.Background(), sum[:], Token{ID: ulid.Make().String(), Name: "n8n", User: "ann", Role: RoleAdmin, CreatedAt: t0},
			AuditEntry{At: t0, Who: "ann", Action: "create token", Target: "n8n"})
	})
	created := 0
	for _, err := range errs {
		switch {
		case err == nil:
			created++
		case !errors.Is(err, ErrExists):
			t.Errorf("CreateToken: %v, want nil or ErrExists", err)
		}
	}
	toks, err := st.Tokens()
	if err != nil {
		t.Fatal(err)
	}
	log, err := st.AuditLog(100)
	if err != nil {
		t.Fatal(err)
	}
	if created != 1 || len(toks) != 1 || len(log) != 1 {
		t.Errorf("created %d, stored %d tokens and %d audit entries; want 1 of each", created, len(toks), len(log))
	}
	// Once revoked, the name is free again.
	if _, err := st.RevokeToken(context.Background(), toks[0].ID, t0); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("secret-again"))
	if err := st.CreateToken(context.Background(), sum[:], Token{ID: ulid.Make().String(), Name: "n8n", CreatedAt: t0}); err != nil {
		t.Errorf("a new token under a revoked one's name: %v", err)
	}
}

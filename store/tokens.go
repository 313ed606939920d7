package store

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Scope is what an API token may do.
type Scope string

// The token scopes, narrowest first.
const (
	ScopeMetrics Scope = "metrics" // GET /metrics only
	ScopeKeys    Scope = "keys"    // the idempotency-key API only
	ScopeRead    Scope = "read"    // the JSON API's reads
	ScopeApprove Scope = "approve" // read, and approve or reject drafts
	ScopeAdmin   Scope = "admin"   // everything
)

// Scopes lists every scope, in the order the dashboard offers them.
var Scopes = []Scope{ScopeApprove, ScopeRead, ScopeKeys, ScopeMetrics, ScopeAdmin}

// ValidScope reports whether s names a scope.
func ValidScope(s Scope) bool {
	switch s {
	case ScopeMetrics, ScopeKeys, ScopeRead, ScopeApprove, ScopeAdmin:
		return true
	}
	return false
}

// Token is an API token, stored by the SHA-256 of its secret; the secret is
// shown once, when it is created.
type Token struct {
	V    int    `json:"v"`
	ID   string `json:"id"`
	Name string `json:"name"`
	User string `json:"user"` // the name of the admin who made it
	// UserID is the ID of the admin who made it (User.ID): the token acts
	// for that person only, never for a later one given the same name.
	UserID string `json:"user_id,omitempty"`
	Scope  Scope  `json:"scope"`
	// Role is what a token of a record written before scopes existed
	// could do; decoding turns it into the Scope (admin: admin, approver:
	// approve), so nothing else reads it.
	Role      Role      `json:"role,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// Clients limits a read or approve token to these clients' channels,
	// as a person's (web/clients.go); empty: every client.
	Clients   []string   `json:"clients,omitempty"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

// UnmarshalJSON decodes a token record; one stored before tokens had
// scopes keeps the meaning of its role.
func (t *Token) UnmarshalJSON(raw []byte) error {
	type record Token // no methods: no recursion
	var r record
	if err := json.Unmarshal(raw, &r); err != nil {
		return err
	}
	if r.Scope == "" {
		switch r.Role {
		case RoleAdmin:
			r.Scope = ScopeAdmin
		case RoleApprover:
			r.Scope = ScopeApprove
		}
	}
	*t = Token(r)
	return nil
}

// CreateToken stores a token under the hash of its secret, with the audit
// entries given, in one transaction; ErrExists when a live token has the
// same name. A token without a UserID is bound, in that transaction, to
// the person its User names (none: it is stored unbound, and opens
// nothing).
func (s *Store) CreateToken(ctx context.Context, hash []byte, t Token, audit ...AuditEntry) error {
	t.V = recordVersion
	return s.update(ctx, func(tx *Tx) error {
		if t.UserID == "" {
			var u User
			if getJSON(tx.bucket(bucketUsers), []byte(t.User), &u) == nil {
				t.UserID = u.ID
			}
		}
		toks := tx.bucket(bucketTokens)
		err := toks.ForEach(func(_, v []byte) error {
			var other Token
			if json.Unmarshal(v, &other) == nil && other.Name == t.Name && other.RevokedAt == nil {
				return ErrExists
			}
			return nil
		})
		if err != nil {
			return err
		}
		if err := putJSON(toks, hash, t); err != nil {
			return err
		}
		if err := tx.bucket(bucketTokensByID).Put([]byte(t.ID), hash); err != nil {
			return err
		}
		return writeAudits(tx, audit)
	})
}

// TokenByHash finds a token by the hash of its secret.
func (s *Store) TokenByHash(hash []byte) (Token, error) {
	var t Token
	err := s.view(func(tx *Tx) error { return getJSON(tx.bucket(bucketTokens), hash, &t) })
	return t, err
}

// RevokeToken marks a token revoked, with the audit entries given, in one
// transaction; revoking twice keeps the first time.
func (s *Store) RevokeToken(ctx context.Context, id string, now time.Time, audit ...AuditEntry) (Token, error) {
	var t Token
	err := s.update(ctx, func(tx *Tx) error {
		t = Token{}
		hash := tx.bucket(bucketTokensByID).Get([]byte(id))
		if hash == nil {
			return ErrNotFound
		}
		if err := getJSON(tx.bucket(bucketTokens), hash, &t); err != nil {
			return err
		}
		if t.RevokedAt == nil {
			t.RevokedAt = &now
		}
		if err := putJSON(tx.bucket(bucketTokens), bytes.Clone(hash), t); err != nil {
			return err
		}
		return writeAudits(tx, audit)
	})
	if err != nil {
		return Token{}, fmt.Errorf("store: revoke token %s: %w", id, err)
	}
	return t, nil
}

// Tokens lists every token, oldest first.
func (s *Store) Tokens() ([]Token, error) {
	out := []Token{}
	err := s.view(func(tx *Tx) error {
		toks := tx.bucket(bucketTokens)
		return tx.bucket(bucketTokensByID).ForEach(func(id, hash []byte) error {
			var t Token
			if err := getJSON(toks, hash, &t); err != nil {
				return err
			}
			out = append(out, t)
			return nil
		})
	})
	return out, err
}

// RevokeTokensOf revokes, at now, every live token u made (by their ID;
// by their name for a token that has none), and returns them.
func (tx *Tx) RevokeTokensOf(u User, now time.Time) ([]Token, error) {
	var out []Token
	toks := tx.bucket(bucketTokens)
	type hit struct {
		hash []byte
		t    Token
	}
	var hits []hit
	err := toks.ForEach(func(k, v []byte) error {
		var t Token
		if err := json.Unmarshal(v, &t); err != nil {
			return fmt.Errorf("token: %w", err)
		}
		mine := t.UserID != "" && t.UserID == u.ID || t.UserID == "" && t.User == u.Name
		if mine && t.RevokedAt == nil {
			hits = append(hits, hit{bytes.Clone(k), t})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Tokens are keyed by their secret's hash, so the bucket's order is
	// random: answer in one the caller can show (by name, then id).
	slices.SortFunc(hits, func(a, b hit) int {
		return cmp.Or(strings.Compare(a.t.Name, b.t.Name), strings.Compare(a.t.ID, b.t.ID))
	})
	for _, h := range hits {
		at := now
		h.t.RevokedAt = &at
		if err := putJSON(toks, h.hash, h.t); err != nil {
			return nil, err
		}
		out = append(out, h.t)
	}
	return out, nil
}

// migrateUserIDs is migration 8: every person gets an ID, and every token
// the ID of the person who made it: the person of its User name, when
// they were created before the token (Token.CreatedAt). A token older
// than its namesake was made by a person since removed, and is revoked.
func migrateUserIDs(tx *Tx) error {
	users := tx.bucket(bucketUsers)
	byName := map[string]User{}
	var all []User
	err := users.ForEach(func(k, v []byte) error {
		var u User
		if err := json.Unmarshal(v, &u); err != nil {
			return fmt.Errorf("user %s: %w", k, err)
		}
		all = append(all, u)
		return nil
	})
	if err != nil {
		return err
	}
	for _, u := range all {
		if u.ID == "" {
			u.ID = NewUserID()
			if err := putJSON(users, []byte(u.Name), u); err != nil {
				return err
			}
		}
		byName[u.Name] = u
	}
	toks := tx.bucket(bucketTokens)
	type fix struct {
		hash []byte
		t    Token
	}
	var fixes []fix
	now := time.Now().UTC()
	err = toks.ForEach(func(k, v []byte) error {
		var t Token
		if err := json.Unmarshal(v, &t); err != nil {
			return fmt.Errorf("token: %w", err)
		}
		if t.UserID != "" {
			return nil
		}
		if u, ok := byName[t.User]; ok && !t.CreatedAt.Before(u.CreatedAt) {
			t.UserID = u.ID
		} else if t.RevokedAt == nil {
			t.RevokedAt = &now
		}
		fixes = append(fixes, fix{bytes.Clone(k), t})
		return nil
	})
	if err != nil {
		return err
	}
	for _, f := range fixes {
		if err := putJSON(toks, f.hash, f.t); err != nil {
			return err
		}
	}
	return nil
}

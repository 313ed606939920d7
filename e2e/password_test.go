package e2e

import (
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/handoff/handoff/proc"
	"github.com/handoff/handoff/store"
)

// TestStoredHashesCostDefault reads the bcrypt cost off the hashes the real
// binary stored: the first admin from HANDOFF_ADMIN_PASSWORD and a person
// added by `handoff user add`. Test binaries hash at bcrypt.MinCost to keep
// the race-detected suite fast (password.cost); the product must not.
func TestStoredHashesCostDefault(t *testing.T) {
	t.Parallel()
	inst := startInstance(t, "")
	inst.stopCleanly()
	cmd := exec.Command(inst.files.Binary, "user", "add", "--data", inst.dataDir, "dana", "--role", "approver")
	cmd.Env = proc.Environ(inst.files.Env...)
	cmd.Stdin = strings.NewReader("violet tractor harbour\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("handoff user add dana: %v\n%s", err, out)
	}
	st, err := store.Open(inst.dataDir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, name := range []string{"admin", "dana"} {
		u, err := st.User(name)
		if err != nil {
			t.Fatalf("user %s: %v", name, err)
		}
		if c, err := bcrypt.Cost(u.PasswordHash); err != nil || c != bcrypt.DefaultCost {
			t.Errorf("%s's stored hash has cost %d (%v); want bcrypt.DefaultCost %d", name, c, err, bcrypt.DefaultCost)
		}
	}
}
